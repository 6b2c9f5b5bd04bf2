/**
 * The scheduling scenarios that must hold on the simulator and on a real kube-apiserver +
 * kube-scheduler alike: identical pods on one node, a control-plane restart in the middle of a
 * burst, and one pod's whole life. Each takes a `Rig`, so both tiers run the very same steps.
 */
import { afterEach, expect, it } from 'vitest';
import type { VcudaDb } from '../../db/connect.js';
import { KubeApiError, type KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import type { LocalCluster } from '../../sim/local-cluster.js';
import { corePerCard, gpuPod, liveRows } from './e2e-helpers.js';

export type Rig = {
  client: KubeClient;
  db: VcudaDb;
  nodeNames: string[];
  killControlPlane(): Promise<void>;
  startControlPlane(): Promise<void>;
};

/** The simulator as a rig: its first control-plane replica is the one killed and restarted. */
export function localClusterRig(lc: LocalCluster): Rig {
  return {
    client: lc.client,
    db: lc.db,
    nodeNames: lc.nodes.map((n) => n.name),
    killControlPlane: () => lc.killReplica(0),
    startControlPlane: () => lc.startReplica(0),
  };
}

const phase = (p: KubeObj) => (p.status as { phase?: string } | undefined)?.phase;
const nodeName = (p: KubeObj) => (p.spec as { nodeName?: string } | undefined)?.nodeName;
const assignment = (p: KubeObj) => p.metadata.annotations?.['vcuda.io/assignment'];

/** A share pod for vcuda's scheduler (named, since no webhook sets it on the real tier), optionally pinned. */
export function sharePod(name: string, core: number, memoryMiB: number, node?: string, command = ['sleep', '600']) {
  const pod = gpuPod(name, core, memoryMiB, { command });
  return {
    ...pod,
    spec: {
      ...pod.spec,
      schedulerName: 'vcuda-scheduler',
      terminationGracePeriodSeconds: 1,
      ...(node ? { nodeSelector: { 'kubernetes.io/hostname': node } } : {}),
    },
  };
}

async function pods(rig: Rig, ns: string): Promise<KubeObj[]> {
  return (await rig.client.list(podPath(ns))).items;
}

async function runningCount(rig: Rig, ns: string): Promise<number> {
  return (await pods(rig, ns)).filter((p) => phase(p) === 'Running').length;
}

export async function createNamespace(rig: Rig, ns: string): Promise<void> {
  await rig.client.create('/api/v1/namespaces', { metadata: { name: ns } });
}

/** Deletes every pod of `ns` and waits until they are gone and the ledger holds nothing for them. */
export async function emptyNamespace(rig: Rig, ns: string): Promise<void> {
  const uids = new Set((await pods(rig, ns)).map((p) => p.metadata.uid));
  for (const p of await pods(rig, ns)) await rig.client.delete(podPath(ns, p.metadata.name)).catch(() => {});
  await expect.poll(async () => (await pods(rig, ns)).length, { timeout: 30_000, interval: 250 }).toBe(0);
  await expect
    .poll(async () => (await liveRows(rig.db)).filter((r) => uids.has(r.podUid)).length, { timeout: 30_000 })
    .toBe(0);
}

/** `count` identical share pods pinned to one node: each gets its own card share, none overcommits. */
export async function identicalPodsOnOneNode(rig: Rig, ns: string, count: number): Promise<number> {
  const node = rig.nodeNames[0]!;
  const start = Date.now();
  await Promise.all(
    Array.from({ length: count }, (_, i) => rig.client.create(podPath(ns), sharePod(`same-${i}`, 20, 1024, node))),
  );
  await expect.poll(() => runningCount(rig, ns), { timeout: 90_000, interval: 250 }).toBe(count);
  const seconds = (Date.now() - start) / 1000;
  const all = await pods(rig, ns);
  expect(new Set(all.map(nodeName))).toEqual(new Set([node]));
  expect(new Set(all.map((p) => assignment(p))).size).toBe(count);
  for (const core of corePerCard(all).values()) expect(core).toBeLessThanOrEqual(100);
  const rows = await liveRows(rig.db);
  const uids = new Set(all.map((p) => p.metadata.uid));
  expect(rows.filter((r) => uids.has(r.podUid)).reduce((s, r) => s + r.core, 0)).toBe(20 * count);
  return seconds;
}

/**
 * Every card taken, pods waiting (kube-scheduler parks them as unschedulable), the control plane
 * killed, the cards freed while it is down, the control plane started again: the waiting pods run
 * within seconds. Returns the seconds from the restart to all running.
 */
export async function restartMidBurst(rig: Rig, ns: string, cards: number, waiting: number): Promise<number> {
  await Promise.all(
    Array.from({ length: cards }, (_, i) => rig.client.create(podPath(ns), sharePod(`whole-${i}`, 100, 1024))),
  );
  await expect.poll(() => runningCount(rig, ns), { timeout: 60_000, interval: 250 }).toBe(cards);
  await Promise.all(
    Array.from({ length: waiting }, (_, i) => rig.client.create(podPath(ns), sharePod(`wait-${i}`, 50, 1024))),
  );
  const parked = async () =>
    (await pods(rig, ns)).filter((p) =>
      ((p.status as { conditions?: { type: string; reason?: string }[] }).conditions ?? []).some(
        (c) => c.type === 'PodScheduled' && c.reason === 'Unschedulable',
      ),
    ).length;
  await expect.poll(parked, { timeout: 30_000, interval: 250 }).toBe(waiting);
  await rig.killControlPlane();
  for (let i = 0; i < cards; i++) await rig.client.delete(podPath(ns, `whole-${i}`));
  await expect
    .poll(async () => (await pods(rig, ns)).filter((p) => p.metadata.name.startsWith('whole-')).length, {
      timeout: 30_000,
      interval: 250,
    })
    .toBe(0);
  const restartedAt = Date.now();
  await rig.startControlPlane();
  await expect.poll(() => runningCount(rig, ns), { timeout: 60_000, interval: 250 }).toBe(waiting);
  const seconds = (Date.now() - restartedAt) / 1000;
  for (const core of corePerCard(await pods(rig, ns)).values()) expect(core).toBeLessThanOrEqual(100);
  return seconds;
}

/** One pod: scheduled, reserved, allocated, running, deleted (the kubelet's final delete), released. */
export async function podLife(rig: Rig, ns: string): Promise<void> {
  const created = await rig.client.create(podPath(ns), sharePod('life', 30, 2048));
  const uid = created.metadata.uid!;
  await expect.poll(async () => phase(await rig.client.get(podPath(ns, 'life'))), { timeout: 30_000 }).toBe('Running');
  const pod = await rig.client.get(podPath(ns, 'life'));
  expect(rig.nodeNames).toContain(nodeName(pod));
  expect(assignment(pod)).toBeTruthy();
  expect(pod.metadata.annotations?.['vcuda.io/allocated-at']).toBeTruthy();
  // The scheduler's word for the node (kube-scheduler's, or the simulator's written as it does),
  // the node agent's for the cards.
  const said = async () =>
    (await rig.client.list(`/api/v1/namespaces/${ns}/events`)).items
      .filter((e) => (e['involvedObject'] as { uid?: string } | undefined)?.uid === uid)
      .map((e) => [e['type'], e['reason'], e['reason'] === 'Scheduled' ? e['message'] : ''])
      .sort();
  await expect.poll(said, { timeout: 10_000 }).toEqual([
    ['Normal', 'Scheduled', `Successfully assigned ${ns}/life to ${nodeName(pod)}`],
    ['Normal', 'VcudaAllocated', ''],
  ]);
  await expect
    .poll(async () => (await liveRows(rig.db, uid)).map((r) => [r.core, r.state]), { timeout: 10_000 })
    .toEqual([[30, 'bound']]);
  await rig.client.delete(podPath(ns, 'life'));
  await expect
    .poll(async () => (await rig.client.list(podPath(ns))).items.some((p) => p.metadata.uid === uid), {
      timeout: 30_000,
    })
    .toBe(false);
  await expect.poll(async () => (await liveRows(rig.db, uid)).length, { timeout: 30_000 }).toBe(0);
}

/**
 * The API server admits pods through vcuda's webhooks: a request that breaks a rule is refused with
 * the webhook's message and nothing is stored; a good one is stored with the webhook's defaults.
 */
export async function admissionThroughWebhooks(rig: Rig, ns: string): Promise<void> {
  const refused = await rig.client.create(podPath(ns), sharePod('bad', 150, 1024)).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(KubeApiError);
  expect((refused as KubeApiError).message).toMatch(/^admission webhook "[^"]+" denied the request: /);
  expect((refused as KubeApiError).message).toContain('resources.limits["nvidia.com/vcuda-core"]');
  expect((await pods(rig, ns)).map((p) => p.metadata.name)).not.toContain('bad');
  const admitted = await rig.client.create(podPath(ns), sharePod('good', 30, 1024));
  expect(admitted.metadata.labels?.['vcuda.io/gpu']).toBe('true');
  expect(admitted.metadata.annotations?.['nvidia.com/vcuda-core-limit']).toBe('30');
}

/** Nobody may change a knob a vcuda pod was admitted with, the API server's own admins included. */
export async function frozenKnobsRefused(rig: Rig, ns: string): Promise<void> {
  await rig.client.create(podPath(ns), sharePod('knobs', 30, 1024));
  const patch = { metadata: { annotations: { 'nvidia.com/vcuda-core-limit': '50' } } };
  const refused = await rig.client.mergePatch(podPath(ns, 'knobs'), patch).catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(KubeApiError);
  expect((refused as KubeApiError).message).toContain('cannot change from "30" to "50" on an existing pod');
  const pod = await rig.client.get(podPath(ns, 'knobs'));
  expect(pod.metadata.annotations?.['nvidia.com/vcuda-core-limit']).toBe('30');
}

/** The scenarios as tests of the calling suite, on the rig its beforeAll builds in namespace `ns`. */
export function schedulingScenarioTests(rig: () => Rig, ns: string): void {
  afterEach(async () => emptyNamespace(rig(), ns), 60_000);

  it('places identical pods on one node, each with its own share', async () => {
    await identicalPodsOnOneNode(rig(), ns, 8);
  }, 120_000);

  it('binds the waiting pods within seconds of a control-plane restart with cards free', async () => {
    expect(await restartMidBurst(rig(), ns, 4, 6)).toBeLessThan(15);
  }, 120_000);

  it("admits pods through vcuda's webhooks: a bad request is refused with the webhook's message", async () => {
    await admissionThroughWebhooks(rig(), ns);
  }, 60_000);

  it('refuses a change of a knob the pod was admitted with, whoever asks', async () => {
    await frozenKnobsRefused(rig(), ns);
  }, 60_000);

  it("runs a pod's whole life, the kubelet's final delete included", async () => {
    await podLife(rig(), ns);
  }, 60_000);
}
