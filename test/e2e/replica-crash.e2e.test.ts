/**
 * A control-plane replica killed at every step of a bind (fault injection in the binder: the hook
 * never returns and the replica is stopped right there, its lease left to lapse as after kill -9):
 * at every observation the ledger holds at least what the verified assignments of bound pods
 * grant (it never under-counts a live pod), and within seconds it holds exactly that, every row
 * confirmed; the dead replica's unfinished reservation costs seconds and next to no refusals.
 * On the simulator, beside a second replica that keeps serving; replica-crash-real.e2e.test.ts
 * does the same on a real kube-apiserver + kube-scheduler.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { type CrashChecks, crashChecks, Trap, trustOf } from './crash-checks.js';
import { gpuPod, liveRows } from './e2e-helpers.js';

const NS = 'crash';

describe('a replica killed mid-bind', () => {
  let lc: LocalCluster;
  let checks: CrashChecks;
  const trap = new Trap(() => lc.killReplica(0));

  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'crash',
        nodes: [{ namePrefix: 'node', count: 2, cards: 4, memoryMiB: 8192 }],
      }),
      replicas: 2,
      logLevel: (process.env['VCUDA_TEST_LOG_LEVEL'] as 'info' | undefined) ?? 'silent',
      schedulerBackoffMs: { initial: 100, max: 1000 },
      // A connection per call, so the Service spreads binds over both replicas.
      schedulerExtenderKeepAlive: false,
      bindFaults: (replica) => (replica === 0 ? trap.faults : undefined),
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
    checks = crashChecks(lc.client, lc.db, NS, trustOf(lc.replicas()[1]!.jwks));
  }, 120_000);
  // Closing a cluster whose replica was killed has taken over 60 s under a full suite's load (the
  // cause is not found yet); give it the HTTP/2 idle limit and more rather than fail the file on it.
  afterAll(async () => lc?.close(), 150_000);

  const pods = async () => (await lc.client.list(podPath(NS))).items;
  const isRunning = (p: KubeObj) => (p.status as { phase?: string } | undefined)?.phase === 'Running';

  afterEach(async () => {
    trap.disarm();
    for (const p of await pods()) await lc.client.delete(podPath(NS, p.metadata.name)).catch(() => undefined);
    // When a pod outlives its deletion, say which and in what state (the wait explained, not just expired).
    const left = async () =>
      (await pods()).map((p) => {
        const status = p.status as { phase?: string } | undefined;
        const spec = p.spec as { nodeName?: string } | undefined;
        const meta = p.metadata as { name: string; deletionTimestamp?: string };
        return `${meta.name} phase=${status?.phase ?? '-'} node=${spec?.nodeName ?? '-'} deleting=${meta.deletionTimestamp ?? 'no'}`;
      });
    try {
      await expect.poll(left, { timeout: 30_000 }).toEqual([]);
    } catch {
      // Seen in full runs: a Running pod still listed 60 s after its graceful delete, its kubelet not
      // finishing it (not understood yet; issue 33). Said here, then forced, so the next test starts
      // clean; the ledger must still drop its rows once the pod is gone.
      console.warn(`replica-crash: pods outlived a graceful delete by 30 s, forced: ${(await left()).join('; ')}`);
      for (const p of await pods()) await lc.client.delete(podPath(NS, p.metadata.name), 0).catch(() => undefined);
      await expect.poll(left, { timeout: 30_000 }).toEqual([]);
    }
    await expect.poll(async () => (await liveRows(lc.db)).length, { timeout: 60_000 }).toBe(0);
    if (!lc.replicas()[0]) await lc.startReplica(0);
  }, 150_000);

  /** Creates pods one at a time (each bound before the next) until the trap springs, then the rest at once. */
  async function createUntilTrapped(count: number, core: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const name = `p-${i}`;
      await lc.client.create(podPath(NS), gpuPod(name, core, 1024));
      if (trap.pod) continue;
      const settled = async () =>
        Boolean(trap.pod) || Boolean(((await lc.client.get(podPath(NS, name))).spec as { nodeName?: string }).nodeName);
      await expect.poll(settled, { timeout: 10_000, interval: 50 }).toBe(true);
    }
  }

  async function bindConflicts(): Promise<Record<string, number>> {
    const text = await (await fetch(`${lc.replicas()[1]!.url}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const l of text.split('\n')) {
      const m = /^vcuda_extender_bind_conflicts_total\{code="([^"]+)"\} (\d+)/.exec(l);
      if (m) out[m[1]!] = Number(m[2]);
    }
    return out;
  }

  for (const step of ['planned', 'reserved', 'bound'] as const) {
    it(`killed at "${step}": the ledger never under-counts a bound pod and soon equals the grants`, async () => {
      trap.arm(step);
      const watch = checks.observe();
      await createUntilTrapped(8, 50);
      await expect.poll(() => trap.pod, { timeout: 30_000 }).toBeDefined();
      await expect.poll(async () => (await pods()).filter(isRunning).length, { timeout: 30_000 }).toBe(8);
      // Exactly the verified grants, every row confirmed: the dead replica's half-bind settled.
      await checks.settlesTo(8, 20_000);
      expect(await watch.stop()).toEqual([]);
    }, 120_000);
  }

  it('after kill -9 mid-bind, every pod that fits runs within 15 s, with a handful of refusals at most', async () => {
    // 2 nodes x 4 cards x 2 shares of 50: 16 pods fill the cluster exactly, so a card the dead
    // replica's reservation holds, if not counted, draws binds the ledger refuses.
    let atKill: Promise<Record<string, number>> = Promise.resolve({});
    trap.onSprung = () => {
      atKill = bindConflicts();
    };
    // The first bind replica 0 takes waits at its reservation until every pod exists, then the
    // replica dies: the 15 s count from the kill, not from pod creation on a busy machine.
    let created: () => void = () => undefined;
    trap.arm('reserved', new Promise<void>((r) => (created = r)));
    await Promise.all(Array.from({ length: 16 }, (_, i) => lc.client.create(podPath(NS), gpuPod(`p-${i}`, 50, 1024))));
    created();
    await expect.poll(() => trap.at, { timeout: 30_000 }).toBeGreaterThan(0);
    await expect.poll(async () => (await pods()).filter(isRunning).length, { timeout: 15_000, interval: 100 }).toBe(16);
    expect(performance.now() - trap.at).toBeLessThan(15_000);
    // Counted from the kill: before it both replicas bound at once, and lost races to each other.
    const before = await atKill;
    const after = await bindConflicts();
    const refused = (code: string) => (after[code] ?? 0) - (before[code] ?? 0);
    // Refusals for lack of room: the dead replica's hold was counted, so next to none.
    expect(refused('capacity-conflict')).toBeLessThanOrEqual(3);
    // The trapped pod itself waits for its old reservation to be released (the lease to lapse).
    expect(refused('conflict')).toBeLessThanOrEqual(12);
    await checks.settlesTo(16, 10_000);
  }, 120_000);
});
