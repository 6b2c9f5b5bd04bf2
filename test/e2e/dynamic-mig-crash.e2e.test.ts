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
 * no GPU instance beside them; and once the pods are gone, no instance and no row is left.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CardGrant } from '../../contract/index.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { inThisProcess } from '../../sim/node/local-node.js';
import { type CrashChecks, crashChecks, Trap, trustOf } from './crash-checks.js';
import { liveRows, migPod } from './e2e-helpers.js';

const NS = 'dyn-crash';
const PROFILE = '1g.10gb';
/** An H100 80GB fits seven 1g.10gb side by side, one per memory slice 0..6. */
const PODS = 7;

type MigGrant = NonNullable<CardGrant['mig']>;

describe('the control plane killed at each step of a dynamic MIG bind', () => {
  let lc: LocalCluster;
  let checks: CrashChecks;
  const trap = new Trap(() => lc.killReplica(0));

  beforeAll(async () => {
    lc = await startLocalCluster({
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
      bindFaults: () => trap.faults,
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
    checks = crashChecks(lc.client, lc.db, NS, trustOf(lc.replicas()[0]!.jwks));
  }, 120_000);
  afterAll(async () => lc?.close(), 150_000);

  const pods = async () => (await lc.client.list(podPath(NS))).items;
  const isRunning = (p: KubeObj) => (p.status as { phase?: string } | undefined)?.phase === 'Running';
  /** The card's GPU instances as the fake driver has them, made for a grant or not: `profile@start`. */
  const driverInstances = () => {
    const gpu = inThisProcess(lc.nodes[0]!).gpu();
    const profiles = gpu.migLayout(0)?.profiles ?? [];
    const control = gpu.migControl();
    if (!control) throw new Error('the fake NVML cannot create MIG instances (make -C native)');
    return control
      .gpuInstances(0)
      .map((gi) => `${profiles.find((p) => p.profileId === gi.profileId)?.profile ?? gi.profileId}@${gi.start}`)
      .sort();
  };

  afterEach(async () => {
    trap.disarm();
    await trap.killed;
    if (!lc.replicas()[0]) await lc.startReplica(0);
    for (const p of await pods()) await lc.client.delete(podPath(NS, p.metadata.name)).catch(() => undefined);
    await expect.poll(async () => (await pods()).length, { timeout: 60_000 }).toBe(0);
    await expect.poll(async () => (await liveRows(lc.db)).length, { timeout: 30_000 }).toBe(0);
    // The node agent gives every instance back once its pod is gone: nothing leaks.
    await expect.poll(driverInstances, { timeout: 30_000 }).toEqual([]);
  }, 150_000);

  /** The dynamic MIG placement each bound pod's verified assignment grants, by pod name. */
  async function grantedPlacements(): Promise<Map<string, MigGrant>> {
    const trust = trustOf(lc.replicas()[0]!.jwks);
    const out = new Map<string, MigGrant>();
    for (const p of await pods()) {
      const token = p.metadata.annotations?.['vcuda.io/assignment'];
      if (!token) continue;
      const verdict = await trust.verify(token);
      if (!verdict.ok) continue;
      const cards = verdict.assignment.containers.flatMap((c) => c.cards);
      expect(cards).toHaveLength(1);
      out.set(p.metadata.name, cards[0]!.mig!);
    }
    return out;
  }

  for (const step of ['planned', 'reserved', 'bound'] as const) {
    it(`killed at "${step}" and restarted: each pod placed once, the ledger its slices, no instance leaked`, async () => {
      // The first bind to reach the step waits there until every pod exists, then the control plane
      // dies with every bind it has in flight, and is started again.
      let created: () => void = () => undefined;
      trap.arm(step, new Promise<void>((r) => (created = r)));
      const watch = checks.observe();
      await Promise.all(
        Array.from({ length: PODS }, (_, i) => lc.client.create(podPath(NS), migPod(`p-${i}`, PROFILE))),
      );
      created();
      await expect.poll(() => trap.at, { timeout: 30_000 }).toBeGreaterThan(0);
      await trap.killed;
      await lc.startReplica(0);

      await expect.poll(async () => (await pods()).filter(isRunning).length, { timeout: 60_000 }).toBe(PODS);
      // Exactly the verified grants' slices, every row confirmed: the dead bind's hold settled.
      await checks.settlesTo(PODS, 30_000);
      expect(await watch.stop()).toEqual([]);

      const card = inThisProcess(lc.nodes[0]!).gpu().migLayout(0)!;
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
      // The trapped pod's grant is one of them: placed once, not again beside its first plan.
      const trapped = (await pods()).find((p) => p.metadata.uid === trap.pod)!;
      expect(granted.get(trapped.metadata.name)).toBeDefined();
    }, 180_000);
  }
});
