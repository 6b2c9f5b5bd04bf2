/**
 * A pod that ended while the ledger was cut: its release failed then, and must land promptly
 * once the ledger is back (within the retry cap of about 2 s), not at the next reconcile.
 *
 * Needs PostgreSQL (PGlite has no network to cut); skipped, and says so, when unreachable.
 */
import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { PendingReleases } from '../../control-plane/extender/pending-releases.js';
import { closeDb, connectDb, rowsOf, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { seedAllocation } from '../support/db/seed-allocation.js';
import { createTestDatabase, postgresForTests, type TestDatabase } from '../support/db/test-databases.js';
import { type ProxyMode, proxyInFrontOf, type TcpProxy } from './tcp-proxy.js';

const reachable = await postgresForTests();

describe.skipIf(!reachable)('the release of a pod that ended during a ledger cut', () => {
  let t: TestDatabase | undefined;
  let proxy: TcpProxy | undefined;
  let viaProxy: VcudaDb | undefined;
  let releases: PendingReleases | undefined;
  afterEach(async () => {
    releases?.close();
    if (viaProxy) await closeDb(viaProxy);
    await proxy?.close();
    await t?.drop();
  });

  it.each<ProxyMode>(['refuse', 'blackhole'])(
    'lands within seconds of the ledger coming back (%s)',
    async (cut) => {
      t = await createTestDatabase('postgres');
      await seedAllocation(t.db, {
        cluster: 'c1',
        node: 'n1',
        cardUuid: 'GPU-1',
        podUid: 'gone',
        namespace: 'ns',
        pod: 'gone',
        container: 'main',
        core: 50,
        at: new Date(),
      });
      const front = await proxyInFrontOf(t.url as string);
      proxy = front.proxy;
      viaProxy = await connectDb({ url: front.url, maxConnections: 1, connectTimeoutSeconds: 1 });
      const ledger = createLedger(viaProxy, { clock: () => new Date() });
      // The control plane's connection is open before the cut, as it would be.
      await viaProxy.execute(sql`select 1`);
      const failures: number[] = [];
      releases = new PendingReleases((uid) => ledger.release('c1', uid), { onError: (_u, _e, n) => failures.push(n) });

      await proxy.setMode(cut);
      releases.add('gone');
      await new Promise((r) => setTimeout(r, 3000));
      const live = async () =>
        rowsOf<{ n: number }>(
          await t!.db.execute(
            sql`select count(*)::int as n from allocations where pod_uid = 'gone' and state <> 'released'`,
          ),
        )[0]?.n;
      expect(await live()).toBe(1);

      await proxy.setMode('forward');
      const back = performance.now();
      while ((await live()) !== 0 && performance.now() - back < 10_000) await new Promise((r) => setTimeout(r, 50));
      const tookMs = performance.now() - back;
      expect(await live()).toBe(0);
      // Well before the 15 s it took when only a reconcile released it.
      expect(tookMs).toBeLessThan(5000);
      expect(releases.size()).toBe(0);
    },
    60_000,
  );
});
