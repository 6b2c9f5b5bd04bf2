/**
 * Shares of a MIG instance shared as a small card (migration 0020): the instance's ledger card
 * keeps core on its own scale (100 = the instance), and its quota weight (the part of the parent
 * card the instance spans) prices them for quotas and GPU-hours, so a 50 share of a 3g.40gb costs
 * a quota 25, as the whole instance would cost it 50. The figures are worked by hand at each step.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { VcudaError } from '../contract/index.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../test/support/db/test-databases.js';
import { rowsOf } from './connect.js';
import { createLedger, type Ledger } from './ledger.js';
import { findCardDrift, findOvercommit } from './ledger-audit.js';
import { runReport } from './reports.js';

const kinds = await testDbKinds();
const at = (s: string) => new Date(`2026-${s}Z`);
/** A 3g.40gb at memory slices 4..7 spans 50 of its card; a 1g.10gb at slice 0 spans 13. */
const INSTANCE_3G = 'MIG-3g';
const INSTANCE_1G = 'MIG-1g';

describe.each(kinds)('quota weight of shared MIG instances on %s', (kind) => {
  let t: TestDatabase;
  let ledger: Ledger;
  let now = at('03-01T10:00:00');

  beforeAll(async () => {
    t = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await t?.drop();
  });
  beforeEach(async () => {
    await t.db.execute(
      sql`truncate allocations, allocation_days, usage_samples, usage_days, pod_holds, cards, nodes, clusters, quotas, team_namespaces`,
    );
    now = at('03-01T10:00:00');
    ledger = createLedger(t.db, { clock: () => now });
    await ledger.upsertNode('c1', 'n1', [
      { uuid: 'GPU-a', index: 0, model: 'H100', memoryMiB: 80_000 },
      { uuid: INSTANCE_3G, index: 1, model: 'H100 MIG 3g.40gb', memoryMiB: 40_000, quotaWeight: 50 },
      { uuid: INSTANCE_1G, index: 1, model: 'H100 MIG 1g.10gb', memoryMiB: 10_000, quotaWeight: 13 },
    ]);
    await ledger.setQuota({
      name: 'ml-q',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 50,
      memoryLimitMiB: 100_000,
    });
  });

  const reserve = (podUid: string, cardUuid: string, core: number, memoryMiB = 1_000) =>
    ledger.reserve({
      cluster: 'c1',
      podUid,
      namespace: 'ml',
      pod: podUid,
      node: 'n1',
      items: [{ container: 'main', cardUuid, core, memoryMiB }],
    });
  const used = async () =>
    rowsOf<{ card: number; quota: number }>(
      await t.db.execute(sql`select (select core_used from cards where uuid = ${INSTANCE_3G}) as card,
        (select core_used from quotas where name = 'ml-q') as quota`),
    )[0];
  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => 'accepted',
      (e: unknown) => (e instanceof VcudaError ? e.message : String(e)),
    );

  it('charges the instance on its scale and the quota on its card’s, and gives back exactly that', async () => {
    await reserve('p1', INSTANCE_3G, 50);
    await reserve('p2', INSTANCE_3G, 50);
    // The instance is full (100 of its own 100); the quota holds 25 + 25 of its 50.
    expect(await used()).toEqual({ card: 100, quota: 50 });
    expect(await refusal(reserve('p3', 'GPU-a', 1))).toMatch(
      /ml-q.*core limit 50, in use 50, pod asks 1 \(over by 1\)/,
    );
    await ledger.release('c1', 'p1');
    expect(await used()).toEqual({ card: 50, quota: 25 });
    // A card of its own scale costs what it asks: 25 fits the 25 left, 26 does not.
    expect(await refusal(reserve('p4', 'GPU-a', 26))).toMatch(/in use 25, pod asks 26 \(over by 1\)/);
    await reserve('p5', 'GPU-a', 25);
    expect(await findOvercommit(t.db)).toEqual([]);
    expect(await findCardDrift(t.db)).toEqual([]);
  });

  it('rounds a share’s cost up, so shares of a small instance never cost less than their part', async () => {
    // 30 of a 1g.10gb spanning 13 of the card: 3.9, charged 4; three of them 12.
    for (const uid of ['a', 'b', 'c']) await reserve(uid, INSTANCE_1G, 30);
    expect(rowsOf<{ q: number }>(await t.db.execute(sql`select core_used as q from quotas`))[0]?.q).toBe(12);
    const rows = rowsOf<{ core: number; quota_core: number }>(
      await t.db.execute(sql`select core, quota_core from allocations order by pod_uid`),
    );
    expect(rows).toEqual([
      { core: 30, quota_core: 4 },
      { core: 30, quota_core: 4 },
      { core: 30, quota_core: 4 },
    ]);
  });

  it('keeps quota totals when an administrative change recomputes them from the rows', async () => {
    await reserve('p1', INSTANCE_3G, 60);
    await reserve('p2', 'GPU-a', 10);
    // Replacing the quota recomputes its totals from the rows: 30 + 10, as charged.
    await ledger.setQuota({
      name: 'ml-q',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 40,
      memoryLimitMiB: 100_000,
    });
    expect((await used())?.quota).toBe(40);
    expect(await findOvercommit(t.db)).toEqual([]);
    // A row written before migration 0020 (quota_core NULL) costs its core, in the audit too.
    await t.db.execute(sql`update allocations set quota_core = null where pod_uid = 'p1'`);
    expect(await findOvercommit(t.db)).toEqual(['quota ml-q: core 70/40, memory 2000/100000 MiB']);
  });

  it('counts GPU-hours allocated and used on the card’s scale, held, released and rebuilt', async () => {
    now = at('03-01T10:00:00');
    await reserve('p1', INSTANCE_3G, 40);
    await reserve('p2', INSTANCE_3G, 60);
    // p2 kept the instance 80 % busy for an hour: 1 h x 0.8 of half a card = 0.4 GPU-h used.
    now = at('03-01T12:00:00');
    const sample = { cluster: 'c1', namespace: 'ml', podUid: 'p2', container: 'main', cardUuid: INSTANCE_3G };
    await ledger.recordUsage([
      { ...sample, sampledAt: at('03-01T11:00:00'), periodS: 3600, smPct: 80, memoryUsedMiB: 1 },
    ]);
    now = at('03-01T16:00:00');
    await ledger.release('c1', 'p1');
    // The day's edge, computed from the samples and the rows: p1 6 h x 0.2, p2 6 h x 0.3 so far.
    const edge = await runReport(t.db, 'gpu-hours', { since: '2026-03-01', until: '2026-03-01T16:00:00Z' }, () => now);
    expect(edge.rows.map((r) => [r.allocatedGpuHours, r.usedGpuHours])).toEqual([[3, 0.4]]);
    // p1: 6 h x 0.20 = 1.2 (released, from the daily roll-up); p2: 14 h x 0.30 = 4.2 (still held).
    now = at('03-02T00:00:00');
    const report = await runReport(
      t.db,
      'gpu-hours',
      { since: '2026-03-01', until: '2026-03-02T00:00:00Z' },
      () => now,
    );
    expect(report.rows.map((r) => [r.day, r.namespace, r.allocatedGpuHours, r.usedGpuHours])).toEqual([
      ['2026-03-01', 'ml', 5.4, 0.4],
    ]);
    // The roll-ups rebuilt from the rows and samples agree with what the release and the sample added.
    await t.db.execute(sql`select vcuda_rebuild_allocation_days()`);
    await t.db.execute(sql`select vcuda_rebuild_usage_days()`);
    const rebuilt = await runReport(
      t.db,
      'gpu-hours',
      { since: '2026-03-01', until: '2026-03-02T00:00:00Z' },
      () => now,
    );
    expect(rebuilt.rows.map((r) => [r.allocatedGpuHours, r.usedGpuHours])).toEqual([[5.4, 0.4]]);
  });

  it('pre-checks shares at the lightest card’s price, whole cards at full price', async () => {
    await reserve('p1', 'GPU-a', 30);
    const ask = (core: number, shareCore?: number) =>
      ledger.precheckQuota({
        cluster: 'c1',
        namespace: 'ml',
        core,
        memoryMiB: 1_000,
        ...(shareCore === undefined ? {} : { shareCore }),
      });
    // 20 left. A 99 share could land on the 1g.10gb for ceil(99 x 13 / 100) = 13: not refused early.
    expect(await ask(99, 99)).toEqual({ ok: true });
    // Counted whole (no share part), it could never fit.
    expect(await ask(99)).toMatchObject({ ok: false, message: expect.stringMatching(/pod asks 99 \(over by 79\)/) });
    // A whole card beside a share: 100 at full price plus 13 is over in any placement.
    expect(await ask(199, 99)).toMatchObject({ ok: false, message: expect.stringMatching(/pod asks 113/) });
    // With no weighted card present in the cluster, shares are priced in full again.
    await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-a', index: 0, model: 'H100', memoryMiB: 80_000 }]);
    expect(await ask(99, 99)).toMatchObject({ ok: false, message: expect.stringMatching(/pod asks 99/) });
  });
});
