/**
 * The node agent's usage report, as it leaves the agent, is what the control plane's endpoint
 * accepts, and the samples land in the ledger where the reports read them. Writers are proven by
 * their service account token, reviewed with the API server (TokenReview) over HTTP.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cachedAuthenticator, requireCaller, tokenReview } from '../../control-plane/api/caller-auth.js';
import { usageRoutes } from '../../control-plane/api/usage-routes.js';
import { apiRoutes, createApp } from '../../control-plane/app.js';
import { closeDb, connectDb, rowsOf, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { createUsageStore } from '../../db/usage.js';
import { HttpUsageSink, tokenFromFile, type UsageSample } from '../../node-agent/usage.js';
import { type SimApiServer, startApiServer } from '../../sim/apiserver/api-server.js';
import { kubeConfigFor } from '../../sim/kubeconfig.js';
import { INFER_ON_NODE_A, seedAllocation } from '../support/db/seed-allocation.js';

const NODE_AGENT = 'system:serviceaccount:vcuda-system:vcuda-node-agent';
let db: VcudaDb;
let api: SimApiServer;
let dir: string;

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
  // The pod holds GPU-1 from an hour before the report: usage counts only while it does.
  await seedAllocation(db, { ...INFER_ON_NODE_A, core: 30, at: new Date('2026-11-22T03:00:00Z') });
  dir = mkdtempSync(join(tmpdir(), 'vcuda-usage-'));
  api = await startApiServer({
    tokens: {
      // A projected token of the agent pod on gpu-node-a, as Kubernetes >= 1.30 reviews it.
      'agent-token': {
        username: NODE_AGENT,
        groups: ['system:serviceaccounts'],
        extra: {
          'authentication.kubernetes.io/node-name': ['gpu-node-a'],
          'authentication.kubernetes.io/pod-name': ['vcuda-node-agent-x7k2p'],
          'authentication.kubernetes.io/pod-uid': ['uid-agent-a'],
        },
      },
      'tenant-token': { username: 'system:serviceaccount:team-a:default', groups: ['system:serviceaccounts'] },
    },
  });
});

afterAll(async () => {
  await api?.close();
  await closeDb(db);
  rmSync(dir, { recursive: true, force: true });
});

const sample: UsageSample = {
  podUid: 'uid-a',
  namespace: 'team-a',
  pod: 'infer',
  container: 'model',
  cardUuid: 'GPU-1',
  memoryUsedBytes: 2 * 1024 ** 3,
  memoryLimitBytes: 8 * 1024 ** 3,
  coreRequest: 30,
  coreLimit: 60,
  smShare: 0.42,
};

it("records a node agent's report, and refuses anyone else's with the reason", async () => {
  const clock = () => new Date('2026-11-22T04:00:00Z');
  const usage = createUsageStore(db, { clock });
  // The control plane reviews tokens with the API server under its own (admin, in the sim) identity.
  const review = tokenReview(kubeConfigFor(api.url));
  const guard = requireCaller(cachedAuthenticator(review), [NODE_AGENT], 'POST /api/v1/usage');
  const app = createApp({ api: apiRoutes(usageRoutes({ clusterName: 'c1', usage, guard, clock })) });
  const fetchFn = ((url: URL, init: RequestInit) => app.request(url.pathname, init)) as unknown as typeof fetch;
  const sinkWith = (token: string | undefined) => {
    const file = join(dir, `token-${token ?? 'none'}`);
    if (token) writeFileSync(file, `${token}\n`);
    return new HttpUsageSink('http://control-plane:8080', { fetchFn, token: tokenFromFile(file) });
  };
  const at = new Date('2026-11-22T03:59:50Z');

  await sinkWith('agent-token').report('gpu-node-a', [sample], at, 10);
  const rows = rowsOf<{ namespace: string; pod_uid: string; sm_pct: number; memory_used_mib: number }>(
    await db.execute(sql`select namespace, pod_uid, sm_pct, memory_used_mib from usage_samples where cluster = 'c1'`),
  );
  expect(rows.map((r) => [r.namespace, r.pod_uid, Number(r.sm_pct), r.memory_used_mib])).toEqual([
    ['team-a', 'uid-a', 42, 2048],
  ]);

  // A tenant's own token is valid but not a node agent's; a made-up one and none at all are refused.
  const forged = { ...sample, smShare: 0 };
  // The node agent's own token speaks for its node only.
  await expect(sinkWith('agent-token').report('gpu-node-b', [forged], at, 10)).rejects.toThrow(
    /HTTP 403 .*node gpu-node-b: the caller's token speaks for node gpu-node-a/,
  );
  await expect(sinkWith('tenant-token').report('gpu-node-a', [forged], at, 10)).rejects.toThrow(
    /HTTP 403 .*system:serviceaccount:team-a:default may not do this; allowed: system:serviceaccount:vcuda-system:vcuda-node-agent/,
  );
  await expect(sinkWith('made-up').report('gpu-node-a', [forged], at, 10)).rejects.toThrow(
    /HTTP 401 .*did not accept the bearer token/,
  );
  await expect(sinkWith(undefined).report('gpu-node-a', [forged], at, 10)).rejects.toThrow(
    /HTTP 401 .*needs a service account token/,
  );
  const count = rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from usage_samples`));
  expect(Number(count[0]?.n)).toBe(1);
});

it("carries a burst from the node agent's sample into the ledger, and the time some of it was on the host", async () => {
  const clock = () => new Date('2026-11-22T04:00:00Z');
  const app = createApp({
    api: apiRoutes(usageRoutes({ clusterName: 'c1', usage: createUsageStore(db, { clock }), clock })),
  });
  const fetchFn = ((url: URL, init: RequestInit) => app.request(url.pathname, init)) as unknown as typeof fetch;
  const bursting: UsageSample = {
    ...sample,
    memoryBurstBytes: 3 * 1024 ** 3,
    memoryBurstEvictedBytes: 1024 ** 3,
    memoryBurstEvictions: 4,
  };
  await new HttpUsageSink('http://control-plane:8080', { fetchFn }).report(
    'gpu-node-a',
    [bursting],
    new Date('2026-11-22T03:59:30Z'),
    10,
  );
  const rows = rowsOf<{ mib: number; evicted: number; s: number; n: number }>(
    await db.execute(sql`select memory_burst_mib as mib, memory_burst_evicted_mib as evicted,
      burst_evicted_s::float8 as s, burst_evictions as n
      from usage_samples where sampled_at = '2026-11-22T03:59:20Z'`),
  );
  expect(rows).toEqual([{ mib: 3072, evicted: 1024, s: 10, n: 4 }]);
});
