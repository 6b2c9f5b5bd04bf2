/**
 * Usage across a ledger outage. A TCP proxy the test controls sits between the usage endpoint and
 * a real PostgreSQL; the ledger is cut for 60 s (six report periods of 10 s, on a clock the test
 * moves) by refusing connections or by a partition. While it is cut every report is a 503 with
 * Retry-After, and the node agent's backlog keeps it; once the ledger is back, the backlog is sent
 * and every period is counted, once.
 *
 * Needs PostgreSQL (PGlite has no network to cut); skipped, and says so, when unreachable.
 */
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { usageRoutes } from '../../control-plane/api/usage-routes.js';
import { apiRoutes, createApp } from '../../control-plane/app.js';
import { closeDb, connectDb, rowsOf, type VcudaDb } from '../../db/connect.js';
import { createUsageStore } from '../../db/usage.js';
import { HttpUsageSink, type UsageSample } from '../../node-agent/usage.js';
import { UsageBacklog } from '../../node-agent/usage-backlog.js';
import { INFER_ON_NODE_A, seedAllocation } from '../support/db/seed-allocation.js';
import { createTestDatabase, postgresForTests, type TestDatabase } from '../support/db/test-databases.js';
import { type ProxyMode, proxyInFrontOf, type TcpProxy } from './tcp-proxy.js';

const reachable = await postgresForTests();
const T0 = Date.parse('2026-11-22T04:00:00Z');
const PERIOD_S = 10;

const sample: UsageSample = {
  podUid: 'uid-a',
  namespace: 'team-a',
  pod: 'infer',
  container: 'model',
  cardUuid: 'GPU-1',
  memoryUsedBytes: 1024 ** 3,
  memoryLimitBytes: 8 * 1024 ** 3,
  coreRequest: 50,
  coreLimit: 50,
  smShare: 0.5,
};

describe.skipIf(!reachable)('usage reports across a 60 s ledger cut', () => {
  let t: TestDatabase | undefined;
  let proxy: TcpProxy | undefined;
  let viaProxy: VcudaDb | undefined;
  afterEach(async () => {
    if (viaProxy) await closeDb(viaProxy);
    await proxy?.close();
    await t?.drop();
  });

  it.each<ProxyMode>(['refuse', 'blackhole'])(
    'loses no usage when the ledger is cut (%s)',
    async (cut) => {
      t = await createTestDatabase('postgres');
      await seedAllocation(t.db, { ...INFER_ON_NODE_A, core: 50, at: new Date(T0 - 3_600_000) });
      const front = await proxyInFrontOf(t.url as string);
      proxy = front.proxy;
      viaProxy = await connectDb({ url: front.url, maxConnections: 2, connectTimeoutSeconds: 1 });
      // The control plane's connections are open before the cut, as they would be.
      await Promise.all([1, 2].map(() => viaProxy?.execute(sql`select pg_sleep(0.05)`)));

      let nowMs = T0;
      const clock = () => new Date(nowMs);
      const usage = createUsageStore(viaProxy, { clock });
      const app = createApp({ api: apiRoutes(usageRoutes({ clusterName: 'c1', usage, clock, writeTimeoutMs: 1000 })) });
      const fetchFn = ((u: URL, init: RequestInit) => app.request(u.pathname, init)) as unknown as typeof fetch;
      const backlog = new UsageBacklog(new HttpUsageSink('http://control-plane:8080', { fetchFn }));
      let periods = 0;
      /** One report period: the clock moves on, the agent reports what it measured. */
      const tick = async () => {
        nowMs += PERIOD_S * 1000;
        periods++;
        return backlog.report('gpu-node-a', [sample], new Date(nowMs), PERIOD_S).then(
          () => undefined,
          (err: Error) => err,
        );
      };

      for (let i = 0; i < 3; i++) expect(await tick()).toBeUndefined();
      await proxy.setMode(cut);
      for (let i = 0; i < 6; i++) {
        const err = await tick();
        expect(err?.message).toMatch(/HTTP 503 .*kept to send again/);
      }
      expect(backlog.pending()).toBe(6);
      const direct = await app.request('/api/v1/usage', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ node: 'gpu-node-a', at: new Date(nowMs).toISOString(), samples: [sample] }),
      });
      expect(direct.status).toBe(503);
      expect(direct.headers.get('retry-after')).toMatch(/^\d+$/);

      await proxy.setMode('forward');
      // The pool may take a period or two to reconnect; each period's report joins the backlog.
      for (let i = 0; i < 10 && (backlog.pending() > 0 || i === 0); i++) await tick();
      expect(backlog.pending()).toBe(0);

      const rows = rowsOf<{ n: number; used: number; days: number }>(
        await t.db.execute(sql`select count(*)::int as n, sum(sm_pct * period_s)::float8 / 100 as used,
        (select sum(used_gpu_seconds) from usage_days)::float8 as days
        from usage_samples where pod_uid = 'uid-a'`),
      )[0];
      // Every period once, at 50 %: nothing lost to the outage, nothing counted twice.
      expect(rows).toEqual({ n: periods, used: periods * PERIOD_S * 0.5, days: periods * PERIOD_S * 0.5 });
    },
    60_000,
  );
});
