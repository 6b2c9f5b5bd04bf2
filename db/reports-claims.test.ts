/**
 * DRA claims in the reports: a claim's shares are ledger rows like a pod's (holder `claim:<uid>`,
 * the claim's name and namespace, one row per share, charged and confirmed at once as the charge
 * hook does), so GPU-hours per namespace and team, quota use and fragmentation count them, and the
 * idle report says which holders are claims. Window 2026-03-01 .. 03-03, now 03-02T12:00Z; the
 * expected numbers are computed by hand beside each step.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimHolderId } from '../contract/index.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../test/support/db/test-databases.js';
import { createLedger } from './ledger.js';
import { runReport } from './reports.js';

const kinds = await testDbKinds();
const at = (s: string) => new Date(`2026-${s}Z`);
const NOW = at('03-02T12:00:00');
const window = { since: '2026-03-01', until: '2026-03-03T00:00:00Z' };
const TRAIN = claimHolderId('u-train');
const OLD = claimHolderId('u-old');

describe.each(kinds)('reports count DRA claims on %s', (kind) => {
  let t: TestDatabase;
  const clock = () => NOW;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    let now = NOW;
    const ledger = createLedger(t.db, { clock: () => now });
    await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 }]);
    await ledger.setTeam('vision', [{ cluster: 'c1', namespace: 'ml' }]);
    await ledger.setQuota({
      name: 'ml-q',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 200,
      memoryLimitMiB: 40_000,
    });
    const charge = async (when: string, podUid: string, pod: string, items: [string, number, number][]) => {
      now = at(when);
      const rows = items.map(([container, core, memoryMiB]) => ({ container, cardUuid: 'GPU-a', core, memoryMiB }));
      await ledger.reserve({ cluster: 'c1', podUid, namespace: 'ml', pod, node: 'n1', items: rows });
      await ledger.confirm('c1', podUid);
    };
    // old: a claim of 20 core, 03-01 10:00 .. 16:00, then its allocation cleared -> 1.2 GPU-h on 03-01.
    await charge('03-01T10:00:00', OLD, 'old', [['gpu/s0', 20, 1_000]]);
    now = at('03-01T16:00:00');
    await ledger.release('c1', OLD);
    // p1: a pod of 50 core from midnight, live -> 12 h x 0.5 = 6 GPU-h on 03-02.
    await charge('03-02T00:00:00', 'p1', 'p1', [['main', 50, 10_000]]);
    // train: a claim with two shares on GPU-a (30 + 10 core) from 06:00, live -> 6 h x 0.4 = 2.4.
    await charge('03-02T06:00:00', TRAIN, 'train', [
      ['gpu/s1', 30, 4_000],
      ['gpu/s2', 10, 2_000],
    ]);
    const sample = (podUid: string, container: string, smPct: number) => ({
      cluster: 'c1',
      namespace: 'ml',
      podUid,
      container,
      cardUuid: 'GPU-a',
      sampledAt: at('03-02T11:30:00'),
      periodS: 1800,
      smPct,
      memoryUsedMiB: 500,
    });
    // train's first share sat idle (1 %), p1 worked; train's second share was never sampled.
    now = NOW;
    await ledger.recordUsage([sample(TRAIN, 'gpu/s1', 1), sample('p1', 'main', 80)]);
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('counts claims in GPU-hours allocated per namespace and per team', async () => {
    const ns = await runReport(t.db, 'gpu-hours', window, clock);
    expect(ns.rows.map((r) => [r.day, r.namespace, r.team, r.allocatedGpuHours])).toEqual([
      ['2026-03-01', 'ml', 'vision', 1.2],
      ['2026-03-02', 'ml', 'vision', 8.4],
    ]);
    const team = await runReport(t.db, 'gpu-hours', { ...window, groupBy: 'team' }, clock);
    expect(team.rows.map((r) => [r.day, r.team, r.allocatedGpuHours])).toEqual([
      ['2026-03-01', 'vision', 1.2],
      ['2026-03-02', 'vision', 8.4],
    ]);
  });

  it('counts claims in quota use and in the card’s fragmentation', async () => {
    const quota = await runReport(t.db, 'quota-usage', {}, clock);
    expect(quota.rows[0]).toMatchObject({ quota: 'ml-q', coreUsed: 90, memoryUsedMiB: 16_000 });
    const frag = await runReport(t.db, 'fragmentation', {}, clock);
    expect(frag.rows).toEqual([
      expect.objectContaining({ card: 'GPU-a', coreFree: 10, memoryFreeMiB: 24_000, strandedCore: 0 }),
    ]);
  });

  it('lists an idle claim share as a claim, by the claim’s name, and no unsampled share', async () => {
    const r = await runReport(t.db, 'idle', { idleBelowPct: 5, idleForMinutes: 30 }, clock);
    expect(r.columns).toContain('holder');
    expect(r.rows).toEqual([
      expect.objectContaining({ holder: 'claim', namespace: 'ml', pod: 'train', container: 'gpu/s1', core: 30 }),
    ]);
    const all = await runReport(t.db, 'idle', { idleBelowPct: 100, idleForMinutes: 30 }, clock);
    expect(all.rows.map((row) => `${row.holder} ${row.pod}`).sort()).toEqual(['claim train', 'pod p1']);
  });
});
