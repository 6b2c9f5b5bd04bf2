import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, rowsOf, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { runReport } from '../../db/reports.js';
import { createUsageStore } from '../../db/usage.js';
import { assignedPod, cardUuid, grantsAsWritten } from '../../test/support/control-plane/builders.js';
import { apiRoutes, createApp } from '../app.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import { type Caller, requireCaller } from './caller-auth.js';
import { usageRoutes } from './usage-routes.js';
import { NODE_NAME_EXTRA, POD_NAME_EXTRA, POD_UID_EXTRA } from './usage-writer.js';

const NOW = new Date('2026-11-22T04:00:00Z');
const BOUND = new Date('2026-11-22T02:00:00Z');
const NODE_AGENT = 'system:serviceaccount:vcuda-system:vcuda-node-agent';
const agentOf = (extra: Caller['extra']): Caller => ({ username: NODE_AGENT, groups: [], ...(extra ? { extra } : {}) });

/** Tokens as the API server reviews them: bound to node A (>= 1.30), to node B's agent pod (older), to nothing. */
const callers: Record<string, Caller> = {
  'agent-a': agentOf({ [NODE_NAME_EXTRA]: ['gpu-node-a'], [POD_NAME_EXTRA]: ['agent-a'], [POD_UID_EXTRA]: ['u-a'] }),
  'agent-b': agentOf({ [POD_NAME_EXTRA]: ['agent-b'], [POD_UID_EXTRA]: ['uid-agent-b'] }),
  'agent-gone': agentOf({ [POD_NAME_EXTRA]: ['agent-c'], [POD_UID_EXTRA]: ['uid-old-agent-c'] }),
  legacy: agentOf(undefined),
};

const agentPod = (name: string, node: string): PodWithStatus => ({
  metadata: { name, namespace: 'vcuda-system', uid: `uid-${name}` },
  spec: { nodeName: node, containers: [] },
  status: { phase: 'Running' },
});
const clusterPods = [
  // vcuda-memory-limit 3072: up to 2048 MiB of burst above its 1024 MiB guarantee.
  assignedPod('infer', 'gpu-node-a', [{ name: 'model', core: 30, memoryMiB: 1024, memoryLimitMiB: 3072, cards: [0] }], {
    namespace: 'team-a',
  }),
  assignedPod('train', 'gpu-node-b', [{ name: 'main', core: 50, memoryMiB: 1024, cards: [0] }], {
    namespace: 'team-b',
  }),
  agentPod('agent-b', 'gpu-node-b'),
  agentPod('agent-c', 'gpu-node-c'),
];
const pods = (namespace: string, name: string) =>
  clusterPods.find((p) => p.metadata?.namespace === namespace && p.metadata?.name === name);

let db: VcudaDb;
let app: ReturnType<typeof createApp>;

const sample = (over: Record<string, unknown> = {}) => ({
  podUid: 'uid-infer',
  namespace: 'team-a',
  pod: 'infer',
  container: 'model',
  cardUuid: cardUuid('gpu-node-a', 0),
  memoryUsedBytes: 3 * 1024 * 1024 + 5,
  memoryLimitBytes: 8 * 1024 * 1024,
  coreRequest: 30,
  coreLimit: 60,
  smShare: 0.25,
  ...over,
});
const trainSample = sample({
  podUid: 'uid-train',
  namespace: 'team-b',
  pod: 'train',
  container: 'main',
  cardUuid: cardUuid('gpu-node-b', 0),
});

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
  // Both pods were bound two hours before NOW, the ledger's allocations say.
  const ledger = createLedger(db, { clock: () => BOUND });
  const card = { index: 0, model: 'A100', memoryMiB: 40_960 };
  await ledger.upsertNode('prod-eu', 'gpu-node-a', [
    { ...card, uuid: cardUuid('gpu-node-a', 0) },
    { ...card, index: 1, uuid: cardUuid('gpu-node-a', 1) },
  ]);
  await ledger.upsertNode('prod-eu', 'gpu-node-b', [{ ...card, uuid: cardUuid('gpu-node-b', 0) }]);
  for (const [uid, namespace, pod, node, container, core] of [
    ['uid-infer', 'team-a', 'infer', 'gpu-node-a', 'model', 30],
    ['uid-train', 'team-b', 'train', 'gpu-node-b', 'main', 50],
  ] as const) {
    const items = [{ container, cardUuid: cardUuid(node, 0), core, memoryMiB: 1024 }];
    await ledger.reserve({ cluster: 'prod-eu', podUid: uid, namespace, pod, node, items });
  }
  const usage = createUsageStore(db, { clock: () => NOW });
  const guard = requireCaller(async (t) => callers[t], [NODE_AGENT], 'POST /api/v1/usage');
  app = createApp({
    api: apiRoutes(
      usageRoutes({ clusterName: 'prod-eu', usage, guard, pods, grants: grantsAsWritten, clock: () => NOW }),
    ),
  });
});

afterAll(async () => {
  await closeDb(db);
});

const post = (body: unknown, token = 'agent-a') =>
  app.request('/api/v1/usage', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;
const countRows = async () =>
  rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from usage_samples`))[0]?.n;

describe('POST /api/v1/usage', () => {
  it('records measured samples in the ledger under the control plane cluster and skips unmeasured ones', async () => {
    const res = await post({
      node: 'gpu-node-a',
      at: '2026-11-22T03:59:50.000Z',
      periodS: 10,
      samples: [sample(), sample({ smShare: null, cardUuid: cardUuid('gpu-node-a', 0) })],
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ recorded: 1, duplicate: 0, outsideAllocation: 0, unknown: 0, skipped: 1 });
    const rows = rowsOf<{
      cluster: string;
      container: string;
      sm_pct: number;
      memory_used_mib: number;
      period_s: number;
    }>(await db.execute(sql`select cluster, container, sm_pct, memory_used_mib, period_s from usage_samples`));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ cluster: 'prod-eu', container: 'model', memory_used_mib: 3 });
    expect(Number(rows[0]?.sm_pct)).toBe(25);
    expect(Number(rows[0]?.period_s)).toBe(10);
  });

  it('counts a sample posted four times once, in the samples and in the daily roll-up', async () => {
    const report = { node: 'gpu-node-a', at: '2026-11-22T03:00:00.000Z', periodS: 10, samples: [sample()] };
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await (await post(report)).json());
    expect(answers).toEqual([
      { recorded: 1, duplicate: 0, outsideAllocation: 0, unknown: 0, skipped: 0 },
      ...Array(3).fill({ recorded: 0, duplicate: 1, outsideAllocation: 0, unknown: 0, skipped: 0 }),
    ]);
    const rows = rowsOf<{ n: number }>(
      await db.execute(sql`select count(*)::int as n from usage_samples where sampled_at = '2026-11-22T02:59:50Z'`),
    );
    expect(rows[0]?.n).toBe(1);
    // 03:59:50 and 03:00:00, 10 s each at 25 %: 5 GPU-seconds, not 2.5 + 4 x 2.5.
    const day = rowsOf<{ s: number }>(await db.execute(sql`select used_gpu_seconds as s from usage_days`));
    expect(day.map((d) => Number(d.s))).toEqual([5]);
  });

  it("refuses samples of another node's pod or of a card not granted, and writes nothing", async () => {
    const before = await countRows();
    const at = '2026-11-22T03:10:00.000Z';
    const otherPod = await post({ node: 'gpu-node-a', at, samples: [sample(), trainSample] });
    expect(otherPod.status).toBe(403);
    expect((await errorOf(otherPod)).message).toMatch(/samples\[1\]: pod team-b\/train runs on node gpu-node-b/);
    const otherCard = await post({
      node: 'gpu-node-a',
      at,
      samples: [sample({ cardUuid: cardUuid('gpu-node-a', 1) })],
    });
    expect(otherCard.status).toBe(403);
    expect((await errorOf(otherCard)).message).toMatch(
      /card GPU-.* is not granted to container model of pod team-a\/infer/,
    );
    const otherContainer = await post({ node: 'gpu-node-a', at, samples: [sample({ container: 'sidecar' })] });
    expect(otherContainer.status).toBe(403);
    // Naming the other node in the report does not help: the token speaks for node A.
    const claimed = await post({ node: 'gpu-node-b', at, samples: [trainSample] });
    expect(claimed.status).toBe(403);
    expect((await errorOf(claimed)).message).toMatch(/node gpu-node-b: the caller's token speaks for node gpu-node-a/);
    expect(await countRows()).toBe(before);
  });

  it("takes the node of an older cluster's token from its bound pod, and refuses a token bound to none", async () => {
    const at = '2026-11-22T03:20:00.000Z';
    const ok = await post({ node: 'gpu-node-b', at, samples: [trainSample] }, 'agent-b');
    expect(await ok.json()).toEqual({ recorded: 1, duplicate: 0, outsideAllocation: 0, unknown: 0, skipped: 0 });
    expect((await post({ node: 'gpu-node-a', at, samples: [sample()] }, 'agent-b')).status).toBe(403);
    const legacy = await post({ node: 'gpu-node-a', at, samples: [sample()] }, 'legacy');
    expect(legacy.status).toBe(403);
    expect((await errorOf(legacy)).message).toMatch(/bound to no pod, so it speaks for no node/);
    // A token of a pod the view holds under another UID: not this agent's node (yet); retry later.
    expect((await post({ node: 'gpu-node-c', at, samples: [] }, 'agent-gone')).status).toBe(503);
  });

  it('records nothing for a pod the cluster does not hold (ended, or made up)', async () => {
    const res = await post({
      node: 'gpu-node-a',
      at: '2026-11-22T03:30:00.000Z',
      samples: [sample({ podUid: 'uid-gone', pod: 'gone' }), sample({ podUid: 'uid-old' })],
    });
    expect(await res.json()).toEqual({ recorded: 0, duplicate: 0, outsideAllocation: 0, unknown: 2, skipped: 0 });
  });

  it.each([
    ['more than a minute ahead', '2026-11-22T04:01:01.000Z', /at: .* is more than a minute ahead/],
    ['far in the future', '9999-12-31T00:00:00.000Z', /at: .* is more than a minute ahead/],
    ['older than the raw samples are kept', '2026-11-21T04:59:59.000Z', /at: .* is more than 23 hours old/],
  ])('refuses a report timed %s with a 400 naming at', async (_name, at, message) => {
    const before = await countRows();
    const res = await post({ node: 'gpu-node-a', at, samples: [sample()] });
    expect(res.status).toBe(400);
    expect((await errorOf(res)).message).toMatch(message);
    expect(await countRows()).toBe(before);
  });

  it('accepts a clock a little ahead', async () => {
    const res = await post({ node: 'gpu-node-a', at: '2026-11-22T04:00:59.000Z', samples: [sample()] });
    expect(res.status).toBe(200);
  });

  it.each([
    ['not JSON', '{', '(body)'],
    ['no node', { at: '2026-11-22T00:00:00Z', samples: [] }, 'node'],
    ['bad time', { node: 'n', at: 'yesterday', samples: [] }, 'at'],
    [
      'share above 1',
      { node: 'n', at: '2026-11-22T00:00:00Z', samples: [sample({ smShare: 1.5 })] },
      'samples[0].smShare',
    ],
    [
      'negative memory',
      { node: 'n', at: '2026-11-22T00:00:00Z', samples: [sample({ memoryUsedBytes: -1 })] },
      'samples[0].memoryUsedBytes',
    ],
    ['period too long', { node: 'n', at: '2026-11-22T00:00:00Z', periodS: 7200, samples: [] }, 'periodS'],
    // Each used to reach PostgreSQL and answer 500 ("out of range for type real" or integer).
    ['period of 1e-300 s', { node: 'n', at: '2026-11-22T03:50:00Z', periodS: 1e-300, samples: [sample()] }, 'periodS'],
    [
      'period past the sampling interval',
      { node: 'n', at: '2026-11-22T03:50:00Z', periodS: 16, samples: [] },
      'periodS',
    ],
    [
      'a share of 1e-300',
      { node: 'n', at: '2026-11-22T03:50:00Z', samples: [sample({ smShare: 1e-300 })] },
      'samples[0].smShare',
    ],
    [
      'memory past a petabyte',
      { node: 'n', at: '2026-11-22T03:50:00Z', samples: [sample({ memoryUsedBytes: 2 ** 52 })] },
      'samples[0].memoryUsedBytes',
    ],
  ])('refuses %s with a 400 naming the field', async (_name, body, field) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    const error = await errorOf(res);
    expect(error.code).toBe('invalid');
    expect(error.message).toContain(field);
  });
});

describe('usage bounded by what the pod could have used', () => {
  const usedGpuHours = async () => {
    const r = await runReport(db, 'gpu-hours', { since: '2026-11-21', until: '2026-11-23' }, () => NOW);
    return r.rows.find((row) => row.namespace === 'team-b')?.usedGpuHours ?? 0;
  };
  const allTrain = (over: Record<string, unknown> = {}) => ({ ...trainSample, smShare: 1, ...over });

  it('adds nothing for reports overlapping a period already counted (50 posts 1 ms apart)', async () => {
    const first = await post({ node: 'gpu-node-b', at: '2026-11-22T03:40:00.000Z', samples: [allTrain()] }, 'agent-b');
    expect(first.status).toBe(200);
    const before = await usedGpuHours();
    let recorded = 0;
    for (let i = 1; i <= 50; i++) {
      const at = new Date(Date.parse('2026-11-22T03:40:00.000Z') - i).toISOString();
      const res = await post({ node: 'gpu-node-b', at, periodS: 15, samples: [allTrain()] }, 'agent-b');
      recorded += ((await res.json()) as { recorded: number }).recorded;
    }
    expect(recorded).toBe(0);
    expect(await usedGpuHours()).toBe(before);
    // The hour the attack claimed is not a period any node agent samples.
    const hour = await post(
      { node: 'gpu-node-b', at: '2026-11-22T03:45:00.000Z', periodS: 3600, samples: [allTrain()] },
      'agent-b',
    );
    expect(hour.status).toBe(400);
    expect(await usedGpuHours()).toBe(before);
  });

  it('adds nothing for samples dated before the pod was bound', async () => {
    const before = await usedGpuHours();
    for (let hour = 0; hour < 2; hour++) {
      const at = new Date(BOUND.getTime() - hour * 3_600_000).toISOString();
      const res = await post({ node: 'gpu-node-b', at, samples: [allTrain()] }, 'agent-b');
      expect(await res.json()).toMatchObject({ recorded: 0, outsideAllocation: 1 });
    }
    expect(await usedGpuHours()).toBe(before);
  });

  it("counts a share above the container's core limit as the limit", async () => {
    const res = await post({ node: 'gpu-node-b', at: '2026-11-22T03:50:00.000Z', samples: [allTrain()] }, 'agent-b');
    expect(await res.json()).toMatchObject({ recorded: 1 });
    const rows = rowsOf<{ sm_pct: number }>(
      await db.execute(
        sql`select sm_pct from usage_samples where pod_uid = 'uid-train' and sampled_at = '2026-11-22T03:49:50Z'`,
      ),
    );
    expect(rows.map((r) => Number(r.sm_pct))).toEqual([50]);
  });
});

describe('bursts in usage samples', () => {
  const MiB = 1024 * 1024;
  type BurstRow = { mib: number; evicted_mib: number; evicted_s: number; evictions: number };
  const burstRow = async (podUid: string, sampledAt: string) =>
    rowsOf<BurstRow>(
      await db.execute(sql`select memory_burst_mib as mib, memory_burst_evicted_mib as evicted_mib,
        burst_evicted_s as evicted_s, burst_evictions as evictions
        from usage_samples where pod_uid = ${podUid} and sampled_at = ${sampledAt}::timestamptz`),
    ).map((r) => ({ ...r, evicted_s: Number(r.evicted_s) }));

  // infer may burst 2048 MiB (vcuda-memory-limit 3072, request 1024). Each case is its own 10 s period.
  it.each([
    [
      'stores burst, evicted bytes (rounded up: a byte on the host is a burst evicted), evictions, and the period as time evicted',
      '03:55:10',
      { memoryBurstBytes: 1536 * MiB, memoryBurstEvictedBytes: 512 * MiB + 1, memoryBurstEvictions: 3 },
      { mib: 1536, evicted_mib: 513, evicted_s: 10, evictions: 3 },
    ],
    [
      'counts no time evicted while the burst is all on the card',
      '03:55:20',
      { memoryBurstBytes: 100 * MiB, memoryBurstEvictedBytes: 0, memoryBurstEvictions: 3 },
      { mib: 100, evicted_mib: 0, evicted_s: 0, evictions: 3 },
    ],
    [
      "clamps a burst above the pod's burst limit (memory limit minus request) to the limit",
      '03:55:30',
      { memoryBurstBytes: 40 * 1024 * MiB, memoryBurstEvictedBytes: 50 * 1024 * MiB },
      { mib: 2048, evicted_mib: 2048, evicted_s: 10, evictions: 0 },
    ],
  ])('%s', async (_name, endsAt, burst, stored) => {
    const at = `2026-11-22T${endsAt}.000Z`;
    const res = await post({ node: 'gpu-node-a', at, samples: [sample(burst)] });
    expect(await res.json()).toMatchObject({ recorded: 1 });
    const startedAt = new Date(Date.parse(at) - 10_000).toISOString();
    expect(await burstRow('uid-infer', startedAt)).toEqual([stored]);
  });

  it('stores no burst for a pod without vcuda-memory-limit, whatever its region says', async () => {
    const claimed = { memoryBurstBytes: 8 * 1024 * MiB, memoryBurstEvictedBytes: 1024 * MiB, memoryBurstEvictions: 9 };
    const res = await post(
      { node: 'gpu-node-b', at: '2026-11-22T03:55:40.000Z', samples: [{ ...trainSample, ...claimed }] },
      'agent-b',
    );
    expect(await res.json()).toMatchObject({ recorded: 1 });
    expect(await burstRow('uid-train', '2026-11-22T03:55:30Z')).toEqual([
      { mib: 0, evicted_mib: 0, evicted_s: 0, evictions: 0 },
    ]);
  });

  it.each([
    ['negative burst bytes', { memoryBurstBytes: -1 }, 'samples[0].memoryBurstBytes'],
    ['burst bytes past a petabyte', { memoryBurstBytes: 2 ** 52 }, 'samples[0].memoryBurstBytes'],
    ['fractional evicted bytes', { memoryBurstEvictedBytes: 1.5 }, 'samples[0].memoryBurstEvictedBytes'],
    ['evictions past int4', { memoryBurstEvictions: 2 ** 31 }, 'samples[0].memoryBurstEvictions'],
    ['evictions as text', { memoryBurstEvictions: '3' }, 'samples[0].memoryBurstEvictions'],
  ])('refuses %s with a 400 naming the field', async (_name, over, field) => {
    const before = await countRows();
    const res = await post({ node: 'gpu-node-a', at: '2026-11-22T03:56:00.000Z', samples: [sample(over)] });
    expect(res.status).toBe(400);
    expect((await errorOf(res)).message).toContain(field);
    expect(await countRows()).toBe(before);
  });
});

describe('the body limit of /api/v1', () => {
  const many = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      sample({
        podUid: `0f6f3a52-5b8c-4a57-9d1e-${String(i).padStart(12, '0')}`,
        pod: `inference-server-7d9f8b6c4-${i}`,
        namespace: 'team-recommendations-prod',
        container: 'model-server',
        cardUuid: `GPU-5c1e0a52-8d3f-4f4e-b9a1-${String(i % 16).padStart(12, '0')}`,
        memoryUsedBytes: 12_345_678_901,
        memoryLimitBytes: 40_000_000_000,
      }),
    );
  const recorded: number[] = [];
  const appWith = (maxBytes?: number) =>
    createApp({
      api: apiRoutes(
        usageRoutes({
          clusterName: 'c1',
          usage: {
            recordUsage: async (s) => {
              recorded.push(s.length);
              return { recorded: s.length, duplicate: 0, outsideAllocation: 0 };
            },
          },
          clock: () => NOW,
        }),
      ),
      ...(maxBytes ? { apiMaxBodyBytes: maxBytes } : {}),
    });
  const postTo = (target: ReturnType<typeof createApp>, samples: unknown[]) =>
    target.request('/api/v1/usage', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ node: 'gpu-node-a', at: '2026-11-22T03:59:50.000Z', samples }),
    });

  it('takes the largest batch a node may send (10,000 samples) under the default limit', async () => {
    const res = await postTo(appWith(), many(10_000));
    expect(res.status).toBe(200);
    expect(recorded.at(-1)).toBe(10_000);
  });

  it('answers 413 past the limit without recording anything', async () => {
    recorded.length = 0;
    const res = await postTo(appWith(64 * 1024), many(1_000));
    expect(res.status).toBe(413);
    expect((await errorOf(res)).message).toBe('request body exceeds 65536 bytes');
    expect(recorded).toEqual([]);
  });
});
