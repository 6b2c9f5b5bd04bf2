/**
 * replica-crash.e2e.test.ts on an unmodified kube-apiserver + kube-scheduler v1.32: the one
 * control plane is killed at each step of a bind (the binder's fault hook never returns and the
 * control plane stops right there, its lease left to lapse) and started again as its Deployment
 * would. At every observation the ledger holds at least the grants of the verified assignments of
 * bound pods; within seconds exactly those, every row confirmed; and after a kill mid-bind every
 * pod that fits runs within 15 s with a handful of refusals at most. Skipped, with the reason in
 * its name, where `../shared/kubernetes-1.32/` is absent.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { BindStep } from '../../control-plane/extender/binder.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import { type CrashChecks, crashChecks, Trap, trustOf } from './crash-checks.js';
import { liveRows } from './e2e-helpers.js';
import { type RealCluster, realTierSkipReason, startRealCluster } from './real-cluster.js';
import { createNamespace, sharePod } from './scheduling-scenarios.js';

const NS = 'crash';
const skip = realTierSkipReason();

describe.skipIf(skip !== undefined)(
  `a control plane killed mid-bind on a real kube-apiserver + kube-scheduler 1.32${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let rc: RealCluster;
    let checks: CrashChecks;
    const trap = new Trap(() => rc.killControlPlane());

    beforeAll(async () => {
      rc = await startRealCluster(
        parseClusterSpec({ name: 'crash', nodes: [{ namePrefix: 'node', count: 2, cards: 4, memoryMiB: 8192 }] }),
        { bindFaults: trap.faults },
      );
      await createNamespace(rc, NS);
      checks = crashChecks(rc.client, rc.db, NS, trustOf(rc.controlPlane()!.jwks));
    }, 240_000);
    afterAll(async () => rc?.close(), 60_000);

    const pods = async () => (await rc.client.list(podPath(NS))).items;
    const running = async () =>
      (await pods()).filter((p: KubeObj) => (p.status as { phase?: string } | undefined)?.phase === 'Running').length;

    afterEach(async () => {
      trap.disarm();
      await trap.killed;
      if (!rc.controlPlane()) await rc.startControlPlane();
      for (const p of await pods()) await rc.client.delete(podPath(NS, p.metadata.name)).catch(() => undefined);
      await expect.poll(async () => (await pods()).length, { timeout: 60_000 }).toBe(0);
      await expect.poll(async () => (await liveRows(rc.db)).length, { timeout: 30_000 }).toBe(0);
    }, 120_000);

    /**
     * Creates the pods; the first bind to reach the armed step waits there until all exist (the
     * webhooks need the control plane), then the control plane dies and is started again, as its
     * Deployment would start it.
     */
    async function createKillRestart(step: BindStep, count: number): Promise<void> {
      let created: () => void = () => undefined;
      trap.arm(step, new Promise<void>((r) => (created = r)));
      await Promise.all(
        Array.from({ length: count }, (_, i) => rc.client.create(podPath(NS), sharePod(`p-${i}`, 50, 1024))),
      );
      created();
      await expect.poll(() => trap.pod, { timeout: 30_000 }).toBeDefined();
      await expect.poll(() => trap.at, { timeout: 5_000 }).toBeGreaterThan(0);
      await trap.killed;
      await rc.startControlPlane();
    }

    for (const step of ['planned', 'reserved', 'bound'] as const) {
      it(`killed at "${step}": the ledger never under-counts a bound pod and soon equals the grants`, async () => {
        const watch = checks.observe();
        await createKillRestart(step, 8);
        await expect.poll(running, { timeout: 30_000, interval: 250 }).toBe(8);
        await checks.settlesTo(8, 20_000);
        expect(await watch.stop()).toEqual([]);
      }, 120_000);
    }

    it('after kill -9 mid-bind, every pod that fits runs within 15 s, with a handful of refusals at most', async () => {
      // 2 nodes x 4 cards x 2 shares of 50: 16 pods fill the cluster exactly.
      await createKillRestart('reserved', 16);
      await expect.poll(running, { timeout: 15_000, interval: 100 }).toBe(16);
      expect(performance.now() - trap.at).toBeLessThan(15_000);
      // The restarted control plane's own counts: every refusal it made came after the kill.
      const text = await (await fetch(`${rc.controlPlane()!.url}/metrics`)).text();
      const refused = (code: string) =>
        Number(new RegExp(`^vcuda_extender_bind_conflicts_total\\{code="${code}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
      expect(refused('capacity-conflict')).toBeLessThanOrEqual(3);
      expect(refused('conflict')).toBeLessThanOrEqual(12);
      await checks.settlesTo(16, 10_000);
    }, 120_000);
  },
);
