/**
 * The preempt verb's decision: for each node kube-scheduler proposes, the card-aware victims
 * (placement/preemption.ts) among the pods that hold its cards, or why the node is dropped.
 * kube-scheduler's own victims are not trusted: it counts vcuda-core per node, not per card, so the
 * answer names this extender's victims instead (kube-scheduler accepts any pods of the node).
 * Pure: the pods and their holds come from the cluster view, the PodDisruptionBudgets from the caller.
 */
import type { NodeInventoryRead, PodWithStatus } from '../placement/cluster-snapshot.js';
import type { FitContext } from '../placement/fit.js';
import type { CardHold } from '../placement/holds/index.js';
import type { PlacementRequest } from '../placement/placement-request.js';
import { chooseVictims, type VictimCandidate, type VictimSet } from '../placement/preemption.js';

type Selector = {
  matchLabels?: Record<string, string> | null;
  matchExpressions?: { key: string; operator: string; values?: string[] | null }[] | null;
};

/** The parts of a policy/v1 PodDisruptionBudget preemption reads. */
export type PdbLike = {
  metadata?: { namespace?: string; name?: string } | null;
  spec?: { selector?: Selector | null } | null;
  status?: { disruptionsAllowed?: number; disruptedPods?: Record<string, unknown> | null } | null;
};

export type NodeHolders = { inventory: NodeInventoryRead; holders: { pod: PodWithStatus; hold: CardHold }[] };

export type PreemptOutcome = {
  chosen: Map<string, VictimSet>;
  /** Node -> why no victims are proposed there. */
  dropped: Map<string, string>;
};

/** A label selector as Kubernetes reads it; an empty or missing one selects nothing for a PDB. */
export function selects(selector: Selector | null | undefined, labels: Record<string, string>): boolean {
  const ml = Object.entries(selector?.matchLabels ?? {});
  const me = selector?.matchExpressions ?? [];
  if (ml.length === 0 && me.length === 0) return false;
  if (!ml.every(([k, v]) => labels[k] === v)) return false;
  return me.every((e) => {
    const has = Object.hasOwn(labels, e.key);
    const inValues = has && (e.values ?? []).includes(labels[e.key] as string);
    if (e.operator === 'In') return inValues;
    if (e.operator === 'NotIn') return !inValues;
    if (e.operator === 'Exists') return has;
    if (e.operator === 'DoesNotExist') return !has;
    return false;
  });
}

/**
 * The pods, in the order given, whose eviction would violate a PodDisruptionBudget, counted as
 * kube-scheduler counts them (filterPodsWithPDBViolation): each matching budget's allowed
 * disruptions are spent pod by pod; a pod the budget already counts as disrupted spends nothing.
 */
export function pdbViolators(pods: readonly PodWithStatus[], pdbs: readonly PdbLike[]): Set<PodWithStatus> {
  const allowed = pdbs.map((p) => p.status?.disruptionsAllowed ?? 0);
  const out = new Set<PodWithStatus>();
  for (const pod of pods) {
    const labels = (pod.metadata as { labels?: Record<string, string> } | undefined)?.labels ?? {};
    pdbs.forEach((pdb, i) => {
      if ((pdb.metadata?.namespace ?? '') !== (pod.metadata?.namespace ?? '')) return;
      if (!selects(pdb.spec?.selector, labels)) return;
      if (pdb.status?.disruptedPods && Object.hasOwn(pdb.status.disruptedPods, pod.metadata?.name ?? '')) return;
      allowed[i] = (allowed[i] as number) - 1;
      if ((allowed[i] as number) < 0) out.add(pod);
    });
  }
  return out;
}

type PodSpecPriority = { priority?: number | null; preemptionPolicy?: string | null };

/** The pod's resolved priority (admission writes spec.priority from its PriorityClass); 0 when none. */
export function priorityOf(pod: PodWithStatus): number {
  const p = (pod.spec as PodSpecPriority | undefined)?.priority;
  return typeof p === 'number' && Number.isFinite(p) ? p : 0;
}

/** Whether the pod's PriorityClass forbids it to preempt (`preemptionPolicy: Never`). */
export function mayPreempt(pod: PodWithStatus): boolean {
  return (pod.spec as PodSpecPriority | undefined)?.preemptionPolicy !== 'Never';
}

function startMsOf(pod: PodWithStatus): number {
  const t = Date.parse((pod.status as { startTime?: string } | null | undefined)?.startTime ?? '');
  return Number.isFinite(t) ? t : 0;
}

/** The node's holders split: the lower-priority running pods preemption may propose, and the rest. */
function candidatesOn(h: NodeHolders, preemptor: PodWithStatus, pdbs: readonly PdbLike[]) {
  const priority = priorityOf(preemptor);
  const kept: CardHold[] = [];
  const lower: { pod: PodWithStatus; hold: CardHold }[] = [];
  for (const x of h.holders) {
    if (x.pod.metadata?.uid === preemptor.metadata?.uid) continue;
    // A pod already terminating keeps its cards until it is gone; evicting it again frees nothing sooner.
    const terminating = Boolean(x.pod.metadata?.deletionTimestamp);
    if (terminating || priorityOf(x.pod) >= priority) kept.push(x.hold);
    else lower.push(x);
  }
  lower.sort((a, b) => priorityOf(b.pod) - priorityOf(a.pod) || startMsOf(a.pod) - startMsOf(b.pod));
  const violators = pdbViolators(
    lower.map((x) => x.pod),
    pdbs,
  );
  const candidates: VictimCandidate[] = lower.map((x) => ({
    uid: x.pod.metadata?.uid ?? '',
    pod: `${x.pod.metadata?.namespace ?? ''}/${x.pod.metadata?.name ?? ''}`,
    priority: priorityOf(x.pod),
    violatesPdb: violators.has(x.pod),
    startMs: startMsOf(x.pod),
    hold: x.hold,
  }));
  return { kept, candidates, priority };
}

/** Victims per proposed node, or why a node is dropped (it then leaves kube-scheduler's candidates). */
export function decidePreemption(opts: {
  preemptor: PodWithStatus;
  request: PlacementRequest;
  nodes: readonly string[];
  holdersOn: (node: string) => NodeHolders | undefined;
  pdbs: readonly PdbLike[];
  ctx: FitContext;
}): PreemptOutcome {
  const out: PreemptOutcome = { chosen: new Map(), dropped: new Map() };
  for (const node of opts.nodes) {
    if (!mayPreempt(opts.preemptor)) {
      out.dropped.set(node, 'the pod may not preempt (preemptionPolicy: Never)');
      continue;
    }
    const h = opts.holdersOn(node);
    if (!h) {
      out.dropped.set(node, 'node is not known to vcuda yet');
      continue;
    }
    const { kept, candidates, priority } = candidatesOn(h, opts.preemptor, opts.pdbs);
    const r = chooseVictims({
      node: h.inventory,
      kept,
      candidates,
      preemptorPriority: priority,
      request: opts.request,
      ctx: opts.ctx,
    });
    if (!r.ok) out.dropped.set(node, r.reason);
    // kube-scheduler reads a node without victims as an error: the pod fits there already.
    else if (r.victims.length === 0) out.dropped.set(node, 'the pod fits without evicting anyone');
    else out.chosen.set(node, r);
  }
  return out;
}
