/**
 * The node agent's usage report, as it leaves the agent, is what the control plane's endpoint
 * accepts, and the samples land in the ledger where the reports read them.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { usageRoutes } from '../../control-plane/api/usage-routes.js';
import { apiRoutes, createApp } from '../../control-plane/app.js';
import { closeDb, connectDb, rowsOf, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { createUsageStore } from '../../db/usage.js';
import { HttpUsageSink, type UsageSample } from '../../node-agent/usage.js';

let db: VcudaDb;

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
});

afterAll(async () => {
  await closeDb(db);
});

it('a node agent report is recorded by the control plane', async () => {
  const usage = createUsageStore(db, { clock: () => new Date('2026-11-22T04:00:00Z') });
  const app = createApp({ api: apiRoutes(usageRoutes({ clusterName: 'c1', usage })) });
  const fetchFn = ((url: URL, init: RequestInit) => app.request(url.pathname, init)) as unknown as typeof fetch;
  const sink = new HttpUsageSink('http://control-plane:8080', fetchFn);
  const samples: UsageSample[] = [
    {
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
    },
  ];
  await sink.report('gpu-node-a', samples, new Date('2026-11-22T03:59:50Z'), 10);
  const rows = rowsOf<{ namespace: string; pod_uid: string; sm_pct: number; memory_used_mib: number }>(
    await db.execute(sql`select namespace, pod_uid, sm_pct, memory_used_mib from usage_samples where cluster = 'c1'`),
  );
  expect(rows.map((r) => [r.namespace, r.pod_uid, Number(r.sm_pct), r.memory_used_mib])).toEqual([
    ['team-a', 'uid-a', 42, 2048],
  ]);
});
