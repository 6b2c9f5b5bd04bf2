/**
 * kube-scheduler's DefaultPreemption (PostFilter), as the simulated scheduler runs it after a pod
 * fits nowhere: a pod whose policy allows it, and that is not already waiting on victims of its
 * nominated node, looks at every node whose failure preemption could cure; on each, victims are
 * chosen by node totals (SelectVictimsOnNode: all lower-priority pods away, then given back by
 * importance while the pod still passes the basic filters); the extenders with a preempt verb may
 * change them (vcuda's chooses them per card) or drop nodes; the best node wins by kube-scheduler's
 * order (fewest PDB violations, lowest highest victim priority, lowest sum, fewest victims); its
 * victims get the DisruptionTarget condition, a `Preempted` Event and a delete with their own grace
 * period, and the pod gets `status.nominatedNodeName`. The pod is then scheduled as usual once the
 * victims are gone. The simulated cluster has no PodDisruptionBudgets: kube-scheduler's counts are 0.
 */
import { type KubeClient, type KubeObj, podPath } from '../kube-client.js';
import { callPreempt, isInterested, type NodeVictims } from './extender-client.js';
import type { ExtenderTransport } from './extender-transport.js';
import { filterNode, type SchedNode, type SchedPod } from './node-filters.js';
import type { ClusterCache } from './scheduler-cache.js';
import type { SchedulerConfig } from './scheduler-config.js';
import { schedulerEvent } from './scheduler-events.js';

export type PreemptionContext = {
  client: KubeClient;
  config: SchedulerConfig;
  cache: ClusterCache;
  transport: ExtenderTransport;
  ignored: ReadonlySet<string>;
  schedulerName: string;
  now: () => number;
  log: (msg: string) => void;
};

type PodSpecPriority = { priority?: number; preemptionPolicy?: string; terminationGracePeriodSeconds?: number };

export function priorityOf(pod: KubeObj): number {
  const p = (pod.spec as PodSpecPriority | undefined)?.priority;
  return typeof p === 'number' ? p : 0;
}

function startOf(pod: KubeObj): number {
  const t = Date.parse((pod.status as { startTime?: string } | undefined)?.startTime ?? '');
  return Number.isFinite(t) ? t : Number.MAX_SAFE_INTEGER;
}

/** kube-scheduler's MoreImportantPod order: higher priority, then the earlier start. */
function moreImportantFirst(a: KubeObj, b: KubeObj): number {
  return priorityOf(b) - priorityOf(a) || startOf(a) - startOf(b);
}

/** Whether a basic-filter failure is one evicting pods could cure (kube-scheduler: Unschedulable, not Unresolvable). */
export function isResolvable(reason: string): boolean {
  return reason === 'Too many pods' || reason.startsWith('Insufficient ');
}

/**
 * podEligibleToPreemptOthers: not with `preemptionPolicy: Never`, and not while a lower-priority
 * pod on its nominated node is still terminating (its earlier victims are on their way out).
 */
export function mayPreempt(pod: KubeObj, cache: ClusterCache): boolean {
  if ((pod.spec as PodSpecPriority | undefined)?.preemptionPolicy === 'Never') return false;
  const nominated = (pod.status as { nominatedNodeName?: string } | undefined)?.nominatedNodeName;
  if (!nominated) return true;
  const p = priorityOf(pod);
  return !cache.podsOn(nominated).some((v) => v.metadata.deletionTimestamp && priorityOf(v) < p);
}

/** SelectVictimsOnNode by node totals: undefined when even removing every lower-priority pod is not enough. */
function victimsOnNode(ctx: PreemptionContext, pod: KubeObj, node: SchedNode): KubeObj[] | undefined {
  const p = priorityOf(pod);
  const lower = ctx.cache.podsOn(node.metadata.name).filter((v) => priorityOf(v) < p);
  const gone = new Set(lower);
  const passes = () =>
    !filterNode(pod as unknown as SchedPod, node, {
      usedOnNode: (n) => ctx.cache.usedOnNode(n, gone),
      ignoredResources: ctx.ignored,
    });
  if (!passes()) return undefined;
  for (const v of [...lower].sort(moreImportantFirst)) {
    gone.delete(v);
    if (!passes()) gone.add(v);
  }
  return gone.size > 0 ? [...gone] : undefined;
}

/** Every interested extender with a preempt verb, in order, may change the victims or drop nodes. */
async function extenderVictims(ctx: PreemptionContext, pod: KubeObj, victims: NodeVictims): Promise<NodeVictims> {
  let current = victims;
  for (const ext of ctx.config.extenders) {
    if (!ext.preemptVerb || !isInterested(ext, pod as unknown as SchedPod) || current.size === 0) continue;
    try {
      const podsOn = (n: string) => ctx.cache.podsOn(n) as unknown as SchedPod[];
      current = await callPreempt(ext, pod as unknown as SchedPod, current, podsOn, ctx.transport);
    } catch (e) {
      if (ext.ignorable) continue;
      throw e;
    }
  }
  return current;
}

/** pickOneNodeForPreemption, on the criteria the simulated cluster has. */
function pickCandidate(victims: NodeVictims): [string, SchedPod[]] | undefined {
  const score = (pods: SchedPod[], pdb: number) => {
    const prios = pods.map((x) => priorityOf(x as unknown as KubeObj));
    return [pdb, Math.max(...prios), prios.reduce((t, x) => t + x + 2 ** 31, 0), pods.length];
  };
  const compare = (a: number[], b: number[]) => {
    const i = a.findIndex((x, k) => x !== b[k]);
    return i < 0 ? 0 : (a[i] as number) - (b[i] as number);
  };
  let best: [string, SchedPod[], number[]] | undefined;
  for (const [node, v] of victims) {
    const s = score(v.pods, v.numPdbViolations);
    if (!best || compare(s, best[2]) < 0) best = [node, v.pods, s];
  }
  return best && [best[0], best[1]];
}

/** prepareCandidate: each victim is marked, told and deleted with its own grace period; the pod is nominated. */
async function evict(ctx: PreemptionContext, pod: KubeObj, node: string, victims: SchedPod[]): Promise<void> {
  const time = new Date(ctx.now()).toISOString();
  for (const v of victims) {
    const ns = v.metadata.namespace ?? 'default';
    const message = `Preempted by pod ${pod.metadata.uid} on node ${node}`;
    const condition = {
      type: 'DisruptionTarget',
      status: 'True',
      reason: 'PreemptionByScheduler',
      message: `${ctx.schedulerName}: preempting to accommodate a higher priority pod`,
      lastTransitionTime: time,
    };
    await ctx.client
      .strategicPatch(`${podPath(ns, v.metadata.name)}/status`, { status: { conditions: [condition] } })
      .catch(() => undefined);
    await schedulerEvent(ctx, v, { reason: 'Preempted', message, type: 'Normal', time });
    await ctx.client.delete(podPath(ns, v.metadata.name)).catch(() => undefined);
    ctx.log(`preempted ${ns}/${v.metadata.name} on ${node} for ${pod.metadata.namespace}/${pod.metadata.name}`);
  }
  const ns = pod.metadata.namespace ?? 'default';
  await ctx.client.strategicPatch(`${podPath(ns, pod.metadata.name)}/status`, { status: { nominatedNodeName: node } });
}

/**
 * PostFilter for a pod that fit nowhere: the node it was nominated to (victims being deleted), or
 * undefined when preemption cannot help. `resolvable` names the nodes whose failure it could cure.
 */
export async function preempt(
  ctx: PreemptionContext,
  pod: KubeObj,
  all: readonly SchedNode[],
  resolvable: ReadonlySet<string>,
): Promise<string | undefined> {
  if (!mayPreempt(pod, ctx.cache)) return undefined;
  const proposed: NodeVictims = new Map();
  for (const node of all) {
    if (!resolvable.has(node.metadata.name)) continue;
    const victims = victimsOnNode(ctx, pod, node);
    if (victims) proposed.set(node.metadata.name, { pods: victims as unknown as SchedPod[], numPdbViolations: 0 });
  }
  if (proposed.size === 0) return undefined;
  const chosen = pickCandidate(await extenderVictims(ctx, pod, proposed));
  if (!chosen) return undefined;
  await evict(ctx, pod, chosen[0], chosen[1]);
  return chosen[0];
}
