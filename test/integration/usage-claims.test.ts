/**
 * GPU-hours used by DRA claims, through the real pieces: claims charged by the claim ledger from
 * their allocation (as the charge hook does), the node agent's usage sink posting each claim's
 * shares (split as the node agent splits a claim's card) with its node-bound token to the control
 * plane's usage route, which takes only shares the ledger charged on that node; the reports then
 * show used beside allocated per namespace and team, and the idle claim. On PGlite and PostgreSQL.
 * Window 2026-03-01 .. 03-03, now 03-02T12:00Z; expected numbers are computed by hand beside each step.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimHolderId, claimShareKey, DEFAULT_DRA_DRIVER, draClaimSchema } from '../../contract/index.js';
import { type Caller, requireCaller } from '../../control-plane/api/caller-auth.js';
import { usageRoutes } from '../../control-plane/api/usage-routes.js';
import { NODE_NAME_EXTRA } from '../../control-plane/api/usage-writer.js';
import { apiRoutes, createApp } from '../../control-plane/app.js';
import { decideClaimCharge } from '../../control-plane/claim-ledger/claim-charge.js';
import { createClaimLedger } from '../../control-plane/claim-ledger/claim-ledger.js';
import { rowsOf } from '../../db/connect.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { runReport } from '../../db/reports.js';
import { createUsageStore } from '../../db/usage.js';
import type { LedgerHolder } from '../../node-agent/allocation/ports.js';
import { HttpUsageSink, shareSamples, type UsageSample } from '../../node-agent/usage.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../support/db/test-databases.js';
import { type ClaimBuilder, claim, GiB } from '../support/node-agent/dra-claim.js';

const kinds = await testDbKinds();
const at = (s: string) => new Date(`2026-${s}Z`);
const NOW = at('03-02T12:00:00');
const window = { since: '2026-03-01', until: '2026-03-03T00:00:00Z' };
const NODE_AGENT = 'system:serviceaccount:vcuda-system:vcuda-node-agent';
const callers: Record<string, Caller> = {
  'agent-n1': { username: NODE_AGENT, groups: [], extra: { [NODE_NAME_EXTRA]: ['n1'] } },
};
const card = (node: string, index: number) => `GPU-${node}-${index}`;

/** The ledger's holder of a claim as the node agent's record of it carries it (claimRecord). */
function holderOf(c: ClaimBuilder, node: string): LedgerHolder {
  const results = draClaimSchema.parse(c.obj()).status?.allocation?.devices?.results ?? [];
  return {
    id: claimHolderId(c.uid),
    name: c.name,
    shares: results.map((r) => ({
      key: claimShareKey(r.request, r.shareID, r.device),
      cardUuid: card(node, Number(r.device.slice('gpu-'.length))),
      cores: Number(r.consumedCapacity?.['cores']),
      memoryBytes: Number(r.consumedCapacity?.['memory']),
    })),
  };
}

/** The claim's budget on one card as collectUsage reads it from its region. */
const cardSample = (c: ClaimBuilder, cardUuid: string, smShare: number, coreLimit: number): UsageSample => ({
  podUid: 'uid-trainer-pod',
  namespace: c.namespace,
  pod: 'trainer',
  container: c.name,
  cardUuid,
  memoryUsedBytes: GiB,
  memoryLimitBytes: 8 * GiB,
  coreRequest: coreLimit,
  coreLimit,
  smShare,
});

describe.each(kinds)('usage of DRA claims through the usage route on %s', (kind) => {
  let t: TestDatabase;
  let ledger: Ledger;
  let now = NOW;
  const clock = () => now;
  // train: two shares on n1's gpu-0 (30 + 10 cores); idle: 20 cores there; done: 50 on gpu-1,
  // cleared at 11:45; far: 10 cores on n2. All in namespace ml (team vision), charged at 06:00.
  const train = claim('train', { pool: 'n1', namespace: 'ml' })
    .share('gpu-0', 30, 4 * GiB)
    .share('gpu-0', 10, 2 * GiB);
  const idle = claim('idle', { pool: 'n1', namespace: 'ml' }).share('gpu-0', 20, 2 * GiB);
  const done = claim('done', { pool: 'n1', namespace: 'ml' }).share('gpu-1', 50, 8 * GiB);
  const far = claim('far', { pool: 'n2', namespace: 'ml' }).share('gpu-0', 10, GiB);
  let sink: HttpUsageSink;
  let answer: unknown;
  const count = async () =>
    Number(rowsOf<{ n: number }>(await t.db.execute(sql`select count(*)::int as n from usage_samples`))[0]?.n);
  /** The node agent's report of n1 over 11:30 .. 12:00. */
  const report = (samples: UsageSample[]) => sink.report('n1', samples, NOW, 1800);

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    ledger = createLedger(t.db, { clock });
    const a100 = { model: 'A100', memoryMiB: 40_960 };
    await ledger.upsertNode('c1', 'n1', [
      { uuid: card('n1', 0), index: 0, ...a100 },
      { uuid: card('n1', 1), index: 1, ...a100 },
    ]);
    await ledger.upsertNode('c1', 'n2', [{ uuid: card('n2', 0), index: 0, ...a100 }]);
    await ledger.setTeam('vision', [{ cluster: 'c1', namespace: 'ml' }]);
    const claims = createClaimLedger({ ledger, cluster: 'c1', driver: DEFAULT_DRA_DRIVER });
    now = at('03-02T06:00:00');
    for (const c of [train, idle, done, far]) {
      await claims.apply(decideClaimCharge(undefined, draClaimSchema.parse(c.obj()), DEFAULT_DRA_DRIVER));
    }
    now = at('03-02T11:45:00');
    await claims.apply({ kind: 'release', claimUid: done.uid });
    now = NOW;
    const usage = createUsageStore(t.db, { clock });
    const guard = requireCaller(async (token) => callers[token], [NODE_AGENT], 'POST /api/v1/usage');
    const app = createApp({
      api: apiRoutes(
        usageRoutes({
          clusterName: 'c1',
          usage,
          guard,
          // As the control plane wires it: pods from its cluster view (none here), claims from the ledger.
          pods: () => undefined,
          grants: () => undefined,
          claims: (holders) => ledger.claimShares('c1', holders),
          clock,
          samplePeriodS: 1800,
        }),
      ),
    });
    // The sink says only whether a report was taken; the route's answer (its counts) is kept here.
    const fetchFn = (async (url: URL, init: RequestInit) => {
      const res = await app.request(url.pathname, init);
      answer = await res.clone().json();
      return res;
    }) as unknown as typeof fetch;
    sink = new HttpUsageSink('http://control-plane', { fetchFn, token: async () => 'agent-n1' });
  });
  afterAll(async () => {
    await t?.drop();
  });

  it("refuses another node's claim, a share the ledger never charged and another namespace, writing nothing", async () => {
    const [share] = shareSamples(cardSample(train, card('n1', 0), 0.32, 40), holderOf(train, 'n1'));
    const [farShare] = shareSamples(cardSample(far, card('n2', 0), 0, 10), holderOf(far, 'n2'));
    if (!share || !farShare) throw new Error('no share samples');
    await expect(report([farShare])).rejects.toThrow(
      /HTTP 403 .*samples\[0\]: resourceclaim ml\/far is charged on node n2, not n1/s,
    );
    await expect(report([{ ...share, container: 'gpu0/forged' }])).rejects.toThrow(
      /HTTP 403 .*is not charged to share gpu0\/forged of resourceclaim ml\/train/s,
    );
    await expect(report([{ ...share, namespace: 'default' }])).rejects.toThrow(
      /HTTP 403 .*claim:.* is resourceclaim ml\/train in the ledger, not default\/train/s,
    );
    expect(await count()).toBe(0);
  });

  it("records each share of n1's claims, a cleared claim's last period up to its release, and no unknown claim", async () => {
    const samples = [
      // train's card measured at 32 % (hard limit 40): 24 % and 8 % for its 30- and 10-core shares.
      ...shareSamples(cardSample(train, card('n1', 0), 0.32, 40), holderOf(train, 'n1')),
      // idle's card at 1 %; done's at 50 %, though cleared at 11:45.
      ...shareSamples(cardSample(idle, card('n1', 0), 0.01, 20), holderOf(idle, 'n1')),
      ...shareSamples(cardSample(done, card('n1', 1), 0.5, 50), holderOf(done, 'n1')),
      // A claim the ledger never charged (another driver's, or gone): nothing to record, nothing wrong.
      { ...cardSample(idle, card('n1', 0), 0.5, 20), podUid: claimHolderId('u-unknown'), pod: 'ghost' },
    ];
    await report(samples);
    expect(answer).toEqual({ recorded: 4, duplicate: 0, outsideAllocation: 0, unknown: 1, skipped: 0 });
    const rows = rowsOf<{ pod_uid: string; container: string; sm_pct: number; period_s: number }>(
      await t.db.execute(
        sql`select pod_uid, container, sm_pct, period_s from usage_samples order by sm_pct desc, container`,
      ),
    );
    expect(rows.map((r) => [r.pod_uid, Number(r.sm_pct), Number(r.period_s)])).toEqual([
      [claimHolderId(done.uid), 50, 900],
      [claimHolderId(train.uid), 24, 1800],
      [claimHolderId(train.uid), 8, 1800],
      [claimHolderId(idle.uid), 1, 1800],
    ]);
  });

  it('shows GPU-hours used by claims beside allocated, per namespace and per team', async () => {
    // Allocated on 03-02: train 6 h x 0.4 + idle 6 h x 0.2 + far 6 h x 0.1 + done 5.75 h x 0.5 = 7.075.
    // Used: train 0.5 h x (0.24 + 0.08) + idle 0.5 h x 0.01 + done 0.25 h x 0.5 = 0.16 + 0.005 + 0.125 = 0.29.
    const ns = await runReport(t.db, 'gpu-hours', window, clock);
    expect(ns.rows.map((r) => [r.day, r.namespace, r.team, r.allocatedGpuHours, r.usedGpuHours])).toEqual([
      ['2026-03-02', 'ml', 'vision', 7.075, 0.29],
    ]);
    const team = await runReport(t.db, 'gpu-hours', { ...window, groupBy: 'team' }, clock);
    expect(team.rows.map((r) => [r.team, r.allocatedGpuHours, r.usedGpuHours])).toEqual([['vision', 7.075, 0.29]]);
    const top = await runReport(t.db, 'top-consumers', window, clock);
    expect(top.rows[0]).toMatchObject({ namespace: 'ml', usedGpuHours: 0.29, efficiencyPct: 4.1 });
  });

  it('lists the idle claim by name as a claim, and the busy shares not', async () => {
    const r = await runReport(t.db, 'idle', { idleBelowPct: 5, idleForMinutes: 30 }, clock);
    expect(r.rows).toEqual([
      expect.objectContaining({ holder: 'claim', namespace: 'ml', pod: 'idle', core: 20, meanSmPct: 1 }),
    ]);
  });

  it("clamps what a claim's region claims to the share's limit, and a claim's burst to none", async () => {
    // 10:30 .. 11:00: the region (writable by the tenant) says 90 % and 2 GiB above the claim's memory.
    const forged = { ...cardSample(train, card('n1', 0), 0.9, 40), memoryBurstBytes: 2 * GiB };
    await sink.report('n1', shareSamples(forged, holderOf(train, 'n1')), at('03-02T11:00:00'), 1800);
    const rows = rowsOf<{ container: string; sm_pct: number; memory_burst_mib: number }>(
      await t.db.execute(sql`select container, sm_pct, memory_burst_mib from usage_samples
        where sampled_at = ${at('03-02T10:30:00').toISOString()}::timestamptz order by sm_pct desc`),
    );
    expect(rows.map((r) => [Number(r.sm_pct), r.memory_burst_mib])).toEqual([
      [30, 0],
      [10, 0],
    ]);
  });
});
