/**
 * The kill -9 of replica-crash-real.e2e.test.ts with a real SIGKILL: the control plane runs as a
 * process of its own on an unmodified kube-apiserver + kube-scheduler v1.32 and the PostgreSQL
 * ledger, the first bind to reach "reserved" holds there until all pods exist, and the process is
 * SIGKILLed with every other bind in flight; its Deployment would start it again, as this does.
 * Every pod that fits runs within 15 s of the kill, with a handful of ledger refusals at most, the
 * ledger never under-counts a bound pod meanwhile, and it settles to exactly the verified grants.
 * Skipped, with the reason in its name, where `../shared/kubernetes-1.32/` or PostgreSQL is absent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import { publishedJwks } from '../../sim/node/published-jwks.js';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../support/db/test-databases.js';
import { crashChecks, trustOf } from './crash-checks.js';
import { liveRows } from './e2e-helpers.js';
import { type RealCluster, realTierSkipReason, startRealCluster } from './real-cluster.js';
import { createNamespace, sharePod } from './scheduling-scenarios.js';

const NS = 'kill9';
const skip = realTierSkipReason() ?? ((await isPostgresReachable()) ? undefined : 'PostgreSQL is not reachable');

describe.skipIf(skip !== undefined)(
  `a control-plane process SIGKILLed mid-bind on a real kube-apiserver + kube-scheduler 1.32${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let database: TestDatabase;
    let rc: RealCluster;

    beforeAll(async () => {
      database = await createTestDatabase('postgres');
      rc = await startRealCluster(
        parseClusterSpec({ name: 'kill9', nodes: [{ namePrefix: 'node', count: 2, cards: 4, memoryMiB: 8192 }] }),
        { databaseUrl: database.url as string, controlPlaneProcess: true },
      );
      await createNamespace(rc, NS);
    }, 240_000);
    afterAll(async () => {
      await rc?.close();
      await database?.drop();
    }, 60_000);

    const running = async () =>
      (await rc.client.list(podPath(NS))).items.filter(
        (p: KubeObj) => (p.status as { phase?: string } | undefined)?.phase === 'Running',
      ).length;

    it('every pod that fits runs within 15 s of the kill, the ledger never under-counting one', async () => {
      const checks = crashChecks(rc.client, rc.db, NS, trustOf(await publishedJwks(rc.client)()));
      await rc.killControlPlane();
      await rc.startControlPlane({ pauseAt: 'reserved' });
      const doomed = rc.controlPlaneProcess();
      const watch = checks.observe();
      // 2 nodes x 4 cards x 2 shares of 50: 16 pods fill the cluster exactly.
      await Promise.all(
        Array.from({ length: 16 }, (_, i) => rc.client.create(podPath(NS), sharePod(`p-${i}`, 50, 1024))),
      );
      const held = await doomed?.paused;
      // Killed with a reservation of its own left behind, which the restarted one must settle.
      expect((await liveRows(rc.db, held)).map((r) => r.state)).toEqual(['reserved']);
      const killedAt = performance.now();
      await rc.killControlPlane();
      expect(await doomed?.exited).toBe('SIGKILL');
      await rc.startControlPlane();
      await expect.poll(running, { timeout: 15_000, interval: 100 }).toBe(16);
      expect(performance.now() - killedAt).toBeLessThan(15_000);
      // The restarted process's own counts: every refusal it made came after the kill.
      const http = rc.controlPlaneProcess()?.ports.http;
      const text = await (await fetch(`http://127.0.0.1:${http}/metrics`)).text();
      const refused = (code: string) =>
        Number(new RegExp(`^vcuda_extender_bind_conflicts_total\\{code="${code}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
      expect(refused('capacity-conflict')).toBeLessThanOrEqual(3);
      expect(refused('conflict')).toBeLessThanOrEqual(12);
      await checks.settlesTo(16, 10_000);
      expect(await watch.stop()).toEqual([]);
    }, 120_000);
  },
);
