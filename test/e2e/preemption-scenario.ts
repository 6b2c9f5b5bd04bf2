/**
 * Preemption, card by card, as one scenario run on the simulator (preemption.e2e.test.ts) and on
 * a real kube-apiserver and kube-scheduler 1.32 (preemption-real.e2e.test.ts): every card of a node
 * holds two low-priority 50-core pods, spread so that the two newest (the ones kube-scheduler's
 * node-level count gives up first) sit on different cards; a high-priority pod asking a whole card
 * must run after exactly the two pods of one card were evicted, with no card ever over 100 core in
 * the ledger or in the signed assignments, and an Event on it naming its victims. Before it, a pod
 * of the same priority whose class says `preemptionPolicy: Never` evicts no one.
 */
import { expect } from 'vitest';
import type { KubeObj } from '../../sim/kube-client.js';
import { podPath } from '../../sim/kube-client.js';
import { corePerCard, liveRows } from './e2e-helpers.js';
import { type Rig, sharePod } from './scheduling-scenarios.js';

const PRIORITY_CLASSES = '/apis/scheduling.k8s.io/v1/priorityclasses';

async function ensurePriorityClass(rig: Rig, name: string, value: number, preemptionPolicy?: string): Promise<void> {
  const body = {
    apiVersion: 'scheduling.k8s.io/v1',
    kind: 'PriorityClass',
    metadata: { name },
    value,
    ...(preemptionPolicy ? { preemptionPolicy } : {}),
  };
  await rig.client.create(PRIORITY_CLASSES, body).catch((e: Error) => {
    if (!/already exists/i.test(e.message)) throw e;
  });
}

function withPriority(pod: ReturnType<typeof sharePod>, className: string, annotations: Record<string, string> = {}) {
  return {
    ...pod,
    metadata: { ...pod.metadata, annotations: { ...(pod.metadata.annotations ?? {}), ...annotations } },
    spec: { ...pod.spec, priorityClassName: className },
  };
}

/** The cards a pod's signed assignment grants. */
function cardsOf(pod: KubeObj): string[] {
  return [...corePerCard([pod]).keys()];
}

/** Samples the ledger until stopped: the most core any card ever held in it. */
function watchLedger(rig: Rig): { stop: () => Promise<number> } {
  let max = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const perCard = new Map<string, number>();
      for (const r of await liveRows(rig.db)) perCard.set(r.cardUuid, (perCard.get(r.cardUuid) ?? 0) + r.core);
      max = Math.max(max, ...perCard.values());
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return max;
    },
  };
}

const phaseOf = (p: KubeObj | undefined) => (p?.status as { phase?: string } | undefined)?.phase;

async function podsOf(rig: Rig, ns: string): Promise<KubeObj[]> {
  return (await rig.client.list(podPath(ns))).items;
}

type PodEvent = KubeObj & { reason?: string; message?: string; involvedObject?: { name?: string } };

async function eventsOf(rig: Rig, ns: string): Promise<PodEvent[]> {
  return (await rig.client.list(`/api/v1/namespaces/${ns}/events`)).items as PodEvent[];
}

/** How many preempt calls the control plane has answered (its own metric). */
async function preemptCalls(metricsUrl: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('vcuda_extender_request_duration_seconds_count{verb="preempt"}'));
  return line ? Number(line.split(' ').pop()) : 0;
}

/**
 * A pod of the same high priority whose class says `preemptionPolicy: Never`: once the scheduler
 * has tried it (its FailedScheduling Event), every low pod is still there and the extender was
 * never asked; the pod is then deleted.
 */
async function neverPreempts(rig: Rig, ns: string, node: string, lows: number, metricsUrl: string): Promise<void> {
  const callsBefore = await preemptCalls(metricsUrl);
  await ensurePriorityClass(rig, 'vcuda-test-never', 1000, 'Never');
  await rig.client.create(podPath(ns), withPriority(sharePod('polite', 100, 1024, node), 'vcuda-test-never'));
  const tried = async () =>
    (await eventsOf(rig, ns)).some((e) => e.reason === 'FailedScheduling' && e.involvedObject?.name === 'polite');
  await expect.poll(tried, { timeout: 30_000, interval: 250 }).toBe(true);
  const spec = (await rig.client.get(podPath(ns, 'polite'))).spec as { priority?: number; preemptionPolicy?: string };
  expect(spec).toMatchObject({ priority: 1000, preemptionPolicy: 'Never' });
  expect((await podsOf(rig, ns)).filter((p) => p.metadata.name.startsWith('low-'))).toHaveLength(lows);
  // The scheduler never asked: kube-scheduler does not run preemption for such a pod at all.
  expect(await preemptCalls(metricsUrl)).toBe(callsBefore);
  expect((await eventsOf(rig, ns)).some((e) => e.reason === 'VcudaPreempting')).toBe(false);
  await rig.client.delete(podPath(ns, 'polite'), 0);
  await expect
    .poll(async () => (await podsOf(rig, ns)).some((p) => p.metadata.name === 'polite'), { timeout: 30_000 })
    .toBe(false);
}

/** Two low-priority 50-core pods per card of `node`, spread, all running; returns them. */
async function fillNode(rig: Rig, ns: string, node: string, cards: number): Promise<KubeObj[]> {
  await ensurePriorityClass(rig, 'vcuda-test-low', 0);
  await ensurePriorityClass(rig, 'vcuda-test-high', 1000);
  const spread = { 'nvidia.com/vcuda-placement': 'spread' };
  for (let i = 0; i < 2 * cards; i++) {
    await rig.client.create(podPath(ns), withPriority(sharePod(`low-${i}`, 50, 1024, node), 'vcuda-test-low', spread));
  }
  const running = async () => (await podsOf(rig, ns)).filter((p) => phaseOf(p) === 'Running');
  await expect.poll(async () => (await running()).length, { timeout: 120_000, interval: 250 }).toBe(2 * cards);
  return podsOf(rig, ns);
}

/**
 * A PodDisruptionBudget (no disruption allowed) over every low pod but those of the oldest pod's
 * card: without it the victims would be the newest pods (kube-scheduler's order); with it the
 * preempt verb, which lists the budgets, must take the two unprotected pods instead.
 */
export async function preemptAroundBudget(rig: Rig, ns: string, node: string, cards: number): Promise<void> {
  const lows = await fillNode(rig, ns, node, cards);
  const free = cardsOf(lows.find((p) => p.metadata.name === 'low-0')!)[0];
  for (const p of lows) {
    const guard = cardsOf(p)[0] === free ? 'no' : 'yes';
    await rig.client.mergePatch(podPath(ns, p.metadata.name), { metadata: { labels: { guard } } });
  }
  await rig.client.create(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`, {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: 'guard' },
    spec: { maxUnavailable: 0, selector: { matchLabels: { guard: 'yes' } } },
  });
  await rig.client.create(podPath(ns), withPriority(sharePod('high', 100, 1024, node), 'vcuda-test-high'));
  await expect
    .poll(async () => phaseOf(await rig.client.get(podPath(ns, 'high')).catch(() => undefined)), { timeout: 30_000 })
    .toBe('Running');
  const left = new Set((await podsOf(rig, ns)).map((p) => p.metadata.name));
  const evicted = lows.filter((p) => !left.has(p.metadata.name));
  expect(evicted.map((p) => cardsOf(p)[0])).toEqual([free, free]);
  expect(cardsOf(await rig.client.get(podPath(ns, 'high')))).toEqual([free]);
}

/** Fills `node` (with `cards` cards) two pods per card, then preempts for one whole card. */
export async function preemptOneCard(
  rig: Rig,
  ns: string,
  node: string,
  cards: number,
  /** The control plane's plain-HTTP URL (its /metrics counts the preempt calls). */
  metricsUrl: string,
): Promise<void> {
  const ledger = watchLedger(rig);
  try {
    const lows = await fillNode(rig, ns, node, cards);
    await neverPreempts(rig, ns, node, 2 * cards, metricsUrl);
    const cardOf = new Map(lows.map((p) => [p.metadata.name, cardsOf(p)[0]]));
    const callsBeforeHigh = await preemptCalls(metricsUrl);
    const created = Date.now();
    const high = sharePod('high', 100, 1024, node);
    await rig.client.create(podPath(ns), withPriority(high, 'vcuda-test-high'));
    await expect
      .poll(async () => phaseOf(await rig.client.get(podPath(ns, 'high')).catch(() => undefined)), {
        timeout: 30_000,
        interval: 250,
      })
      .toBe('Running');
    expect(Date.now() - created).toBeLessThan(30_000);
    expect(await preemptCalls(metricsUrl)).toBeGreaterThan(callsBeforeHigh);
    const left = new Set((await podsOf(rig, ns)).map((p) => p.metadata.name));
    const evicted = lows.map((p) => p.metadata.name).filter((n) => !left.has(n));
    expect(evicted).toHaveLength(2);
    const freed = cardOf.get(evicted[0]!);
    expect(cardOf.get(evicted[1]!)).toBe(freed);
    expect(cardsOf(await rig.client.get(podPath(ns, 'high')))).toEqual([freed]);
    for (const core of corePerCard(await podsOf(rig, ns)).values()) expect(core).toBeLessThanOrEqual(100);
    const said = (await eventsOf(rig, ns)).find(
      (e) => e.reason === 'VcudaPreempting' && e.involvedObject?.name === 'high',
    );
    for (const name of evicted) expect(said?.message).toContain(`${ns}/${name}`);
    // kube-scheduler's own traces: a Preempted Event per victim naming the pod and node, and the node
    // it nominated the pod to.
    const highPod = await rig.client.get(podPath(ns, 'high'));
    const preempted = (await eventsOf(rig, ns)).filter((e) => e.reason === 'Preempted');
    expect(preempted.map((e) => e.involvedObject?.name).sort()).toEqual([...evicted].sort());
    for (const e of preempted) expect(e.message).toBe(`Preempted by pod ${highPod.metadata.uid} on node ${node}`);
    expect((highPod.status as { nominatedNodeName?: string }).nominatedNodeName).toBe(node);
  } finally {
    expect(await ledger.stop()).toBeLessThanOrEqual(100);
  }
}
