/**
 * The control plane killed at every step of a dynamic MIG bind, then started again as its
 * Deployment would: after planning (the placement assumed in its view only), after the ledger
 * reservation (the placement's memory slices held, no Binding yet) and after the Binding (the
 * reservation not confirmed). The binder's fault hook never returns and the control plane stops
 * right there, its lease left to lapse as after kill -9 (crash-checks.ts), with every other bind it
 * had in flight. Seven `nvidia.com/mig-1g.10gb` pods fill the one H100 kept for dynamic MIG, so a
 * slice the dead bind's reservation kept would leave one pending. Each pod is placed once, at a
 * legal placement its verified grant names; the ledger never under-counts a bound pod and soon holds
 * exactly the grants' slices, every row confirmed; the fake driver has exactly the grants' instances,
 * no GPU instance beside them; and once the pods are gone, no instance and no row is left. The same
 * again with the control plane as a process of its own, SIGKILLed at each step (a real PostgreSQL
 * ledger, which two processes can share; skipped, saying so, where none is reachable).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CardGrant } from '../../contract/index.js';
import type { AssignmentTrust } from '../../control-plane/assignment-trust.js';
import type { BindStep } from '../../control-plane/extender/binder.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { inThisProcess } from '../../sim/node/local-node.js';
import { type ControlPlaneChild, startControlPlaneChild } from '../support/control-plane/control-plane-child.js';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../support/db/test-databases.js';
import { type CrashChecks, crashChecks, Trap, trustOf } from './crash-checks.js';
import { liveRows, migPod } from './e2e-helpers.js';

const NS = 'dyn-crash';
const PROFILE = '1g.10gb';
/** An H100 80GB fits seven 1g.10gb side by side, one per memory slice 0..6. */
const PODS = 7;

type MigGrant = NonNullable<CardGrant['mig']>;

const STEPS: readonly BindStep[] = ['planned', 'reserved', 'bound'];

/** A local cluster with one H100 kept for dynamic MIG; `databaseUrl`: its ledger, else embedded. */
function startDynamicMigCluster(opts: { databaseUrl?: string; trap?: Trap }): Promise<LocalCluster> {
  return startLocalCluster({
    cluster: parseClusterSpec({
      name: 'dyn-crash',
      nodes: [
        {
          name: 'h100-dynamic',
          cards: 1,
          model: 'NVIDIA H100 80GB HBM3',
          memoryMiB: 81559,
          numaNodes: 1,
          mig: [{ card: 0, dynamic: true }],
        },
      ],
    }),
    logLevel: (process.env['VCUDA_TEST_LOG_LEVEL'] as 'info' | undefined) ?? 'silent',
    schedulerBackoffMs: { initial: 100, max: 1000 },
    ...(opts.databaseUrl ? { databaseUrl: opts.databaseUrl } : {}),
    ...(opts.trap ? { bindFaults: () => opts.trap?.faults } : {}),
  });
}

/** The checks of one cluster: what its pods were granted, what its fake driver has, its cleanup. */
function dynamicMigChecks(lc: () => LocalCluster) {
  const pods = async () => (await lc().client.list(podPath(NS))).items;
  const isRunning = (p: KubeObj) => (p.status as { phase?: string } | undefined)?.phase === 'Running';
  // The cluster's signing keys, read from a replica running in this process once the cluster runs
  // (every replica, in this process or not, signs with the keys of the cluster's Secret).
  let trusted: AssignmentTrust | undefined;
  const trust = () => {
    trusted ??= trustOf(lc().replicas()[0]!.jwks);
    return trusted;
  };
  const checks = (): CrashChecks => crashChecks(lc().client, lc().db, NS, trust());

  /** The card's GPU instances as the fake driver has them, made for a grant or not: `profile@start`. */
  const driverInstances = () => {
    const gpu = inThisProcess(lc().nodes[0]!).gpu();
    const profiles = gpu.migLayout(0)?.profiles ?? [];
    const control = gpu.migControl();
    if (!control) throw new Error('the fake NVML cannot create MIG instances (make -C native)');
    return control
      .gpuInstances(0)
      .map((gi) => `${profiles.find((p) => p.profileId === gi.profileId)?.profile ?? gi.profileId}@${gi.start}`)
      .sort();
  };

  /** The dynamic MIG placement each bound pod's verified assignment grants, by pod name. */
  async function grantedPlacements(): Promise<Map<string, MigGrant>> {
    const out = new Map<string, MigGrant>();
    for (const p of await pods()) {
      const token = p.metadata.annotations?.['vcuda.io/assignment'];
      if (!token) continue;
      const verdict = await trust().verify(token);
      if (!verdict.ok) continue;
      const cards = verdict.assignment.containers.flatMap((c) => c.cards);
      expect(cards).toHaveLength(1);
      out.set(p.metadata.name, cards[0]!.mig!);
    }
    return out;
  }

  return {
    /** Once the cluster runs: its namespace, and its keys read. */
    async ready(): Promise<void> {
      await lc().client.create('/api/v1/namespaces', { metadata: { name: NS } });
      trust();
    },
    checks,
    /**
     * Creates the pods not there yet, all at once (a creation whose admission webhook died with the
     * control plane is made again after its restart); fails on none.
     */
    async createPods(): Promise<void> {
      const there = new Set((await pods()).map((p) => p.metadata.name));
      const names = Array.from({ length: PODS }, (_, i) => `p-${i}`).filter((n) => !there.has(n));
      await Promise.all(
        names.map((n) =>
          lc()
            .client.create(podPath(NS), migPod(n, PROFILE))
            .catch(() => undefined),
        ),
      );
    },
    /**
     * Every pod runs, placed once at a legal placement; the ledger holds exactly the grants' slices,
     * confirmed, and never under-counted a bound pod (`watch`); the driver has exactly their instances.
     */
    async placedOnce(watch: { stop: () => Promise<string[]> }, killedPodUid?: string): Promise<void> {
      await expect.poll(async () => (await pods()).filter(isRunning).length, { timeout: 60_000 }).toBe(PODS);
      // Exactly the verified grants' slices, every row confirmed: the dead bind's hold settled.
      await checks().settlesTo(PODS, 30_000);
      expect(await watch.stop()).toEqual([]);
      const card = inThisProcess(lc().nodes[0]!).gpu().migLayout(0)!;
      const legal = card.profiles.find((p) => p.profile === PROFILE)!.placements;
      const granted = await grantedPlacements();
      expect(granted.size).toBe(PODS);
      for (const mig of granted.values()) {
        expect(mig).toMatchObject({ profile: PROFILE, dynamic: true, size: 1 });
        expect(legal).toContain(mig.start);
      }
      // One instance per pod at its granted placement, and no GPU instance beside them.
      const wanted = [...granted.values()].map((m) => `${m.profile}@${m.start}`).sort();
      expect(new Set(wanted).size).toBe(PODS);
      await expect.poll(driverInstances, { timeout: 15_000 }).toEqual(wanted);
      if (killedPodUid) {
        // The pod whose bind died is one of them: placed once, not again beside its first plan.
        const killed = (await pods()).find((p) => p.metadata.uid === killedPodUid)!;
        expect(granted.get(killed.metadata.name)).toBeDefined();
      }
    },
    /** Deletes the pods; then no pod, no ledger row and no instance is left (nothing leaks). */
    async cleanUp(): Promise<void> {
      for (const p of await pods())
        await lc()
          .client.delete(podPath(NS, p.metadata.name))
          .catch(() => undefined);
      await expect.poll(async () => (await pods()).length, { timeout: 60_000 }).toBe(0);
      await expect.poll(async () => (await liveRows(lc().db)).length, { timeout: 30_000 }).toBe(0);
      // The node agent gives every instance back once its pod is gone.
      await expect.poll(driverInstances, { timeout: 30_000 }).toEqual([]);
    },
  };
}

describe('the control plane killed at each step of a dynamic MIG bind (fault hook)', () => {
  let lc: LocalCluster;
  const trap = new Trap(() => lc.killReplica(0));
  const cluster = dynamicMigChecks(() => lc);

  beforeAll(async () => {
    lc = await startDynamicMigCluster({ trap });
    await cluster.ready();
  }, 120_000);
  afterAll(async () => lc?.close(), 150_000);

  afterEach(async () => {
    trap.disarm();
    await trap.killed;
    if (!lc.replicas()[0]) await lc.startReplica(0);
    await cluster.cleanUp();
  }, 150_000);

  for (const step of STEPS) {
    it(`killed at "${step}" and restarted: each pod placed once, the ledger its slices, no instance leaked`, async () => {
      // The first bind to reach the step waits there until every pod exists, then the control plane
      // dies with every bind it has in flight, and is started again.
      let created: () => void = () => undefined;
      trap.arm(step, new Promise<void>((r) => (created = r)));
      const watch = cluster.checks().observe();
      await cluster.createPods();
      created();
      await expect.poll(() => trap.at, { timeout: 30_000 }).toBeGreaterThan(0);
      await trap.killed;
      await lc.startReplica(0);
      await cluster.placedOnce(watch, trap.pod);
    }, 180_000);
  }
});

const noPostgres = (await isPostgresReachable())
  ? undefined
  : 'no PostgreSQL at VCUDA_TEST_DATABASE_URL or 127.0.0.1:5432';

describe.skipIf(noPostgres !== undefined)(
  `the control plane's process SIGKILLed at each step of a dynamic MIG bind${noPostgres ? ` (skipped: ${noPostgres})` : ''}`,
  () => {
    let lc: LocalCluster;
    let ledger: TestDatabase;
    let child: ControlPlaneChild | undefined;
    const cluster = dynamicMigChecks(() => lc);

    beforeAll(async () => {
      ledger = await createTestDatabase('postgres');
      lc = await startDynamicMigCluster({ databaseUrl: ledger.url! });
      await cluster.ready();
    }, 120_000);
    afterAll(async () => {
      await lc?.close();
      await ledger?.drop();
    }, 150_000);

    afterEach(async () => {
      // One that never reached its step (a failed test) must not outlive it.
      child?.kill();
      if (!lc.replicas()[0]) await lc.startReplica(0);
      await cluster.cleanUp();
    }, 150_000);

    for (const step of STEPS) {
      it(`SIGKILLed at "${step}", started again: each pod placed once, the ledger its slices, no instance leaked`, async () => {
        // The in-process replica gives way to one in its own process, which kills itself at the step.
        await lc.killReplica(0);
        child = await startControlPlaneChild(lc, {
          replica: 0,
          dbUrl: ledger.url!,
          killAt: step,
          deadlineMs: 60_000,
        });
        const watch = cluster.checks().observe();
        let signal: NodeJS.Signals | null | undefined;
        void child.exited.then((s) => {
          signal = s;
        });
        await cluster.createPods();
        await expect.poll(() => signal, { timeout: 30_000 }).toBe('SIGKILL');
        // Its Deployment starts it again.
        await lc.startReplica(0);
        await cluster.createPods();
        await cluster.placedOnce(watch);
      }, 180_000);
    }
  },
);
