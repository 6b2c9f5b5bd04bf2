/**
 * POST /scheduler/preempt (ExtenderPreemptionArgs -> ExtenderPreemptionResult): kube-scheduler
 * proposes nodes with the victims it counted per node; the answer keeps the nodes where evicting
 * lower-priority pods makes room on specific cards, each with those pods, and drops the rest.
 * Nothing is reserved or released here: the victims' ledger rows go when the pods are really gone
 * (the reconcile and delete path), and the pod's cards are reserved by bind, as for any pod.
 */
import { type EventReason, eventReasons, ValidationError } from '../../contract/index.js';
import type { ClusterState } from '../cluster-state.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import type { FitContext } from '../placement/fit.js';
import type { PlacementRequest } from '../placement/placement-request.js';
import type { VictimSet } from '../placement/preemption.js';
import type { ExtenderPreemptionResult, PreemptionArgs } from './extender-api.js';
import { preemptionNodeNames } from './extender-api.js';
import { decidePreemption, type PdbLike } from './preempt-decision.js';

export type PreemptVerbDeps = {
  state: ClusterState;
  /** policy/v1 PodDisruptionBudgets; none known when absent or when listing fails. */
  listPdbs?: () => Promise<PdbLike[]>;
  readRequest: (pod: PodWithStatus) => PlacementRequest | ValidationError;
  fitContext: () => FitContext;
  isGpuPod: (pod: PodWithStatus) => boolean;
  recordEvent: (pod: { namespace: string; name: string; uid: string }, reason: EventReason, message: string) => void;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
};

async function pdbsOrNone(deps: PreemptVerbDeps): Promise<PdbLike[]> {
  if (!deps.listPdbs) return [];
  try {
    return await deps.listPdbs();
  } catch (err) {
    // kube-scheduler treats budgets as a preference too: without them the victims are still minimal.
    deps.log?.('PodDisruptionBudgets not readable; preempting without them', { err });
    return [];
  }
}

/** What the preemptor's Event says: per node, who would go and for which cards. */
export function describeVictims(chosen: ReadonlyMap<string, VictimSet>): string {
  const parts = [...chosen].map(([node, set]) => {
    const cards = [...set.placement.cardUse.keys()].join(', ');
    const who = set.victims.map((v) => `${v.pod} (priority ${v.priority})`).join(', ');
    const pdb = set.pdbViolations > 0 ? `, ${set.pdbViolations} against a PodDisruptionBudget` : '';
    return `on ${node} for ${cards}: ${who}${pdb}`;
  });
  return `preempting lower-priority pods ${parts.join('; ')}`;
}

/** The preempt verb over the cluster view: never throws for a bad pod, it drops every node instead. */
export async function answerPreemption(deps: PreemptVerbDeps, args: PreemptionArgs): Promise<ExtenderPreemptionResult> {
  const pod = args.Pod as PodWithStatus;
  const result: ExtenderPreemptionResult = { NodeNameToMetaVictims: {} };
  const nodes = preemptionNodeNames(args);
  // A pod vcuda does not place: kube-scheduler's node-level victims stand as proposed.
  if (!deps.isGpuPod(pod)) {
    const uidOf = (p: { UID?: unknown; metadata?: unknown }) =>
      typeof p.UID === 'string' ? p.UID : String((p.metadata as { uid?: string } | undefined)?.uid ?? '');
    const given: Record<string, { Pods?: { UID?: unknown }[] | null; NumPDBViolations?: number | null }> =
      args.NodeNameToMetaVictims ?? args.NodeNameToVictims ?? {};
    for (const [node, v] of Object.entries(given)) {
      result.NodeNameToMetaVictims[node] = {
        Pods: (v.Pods ?? []).map((p) => ({ UID: uidOf(p) })),
        NumPDBViolations: v.NumPDBViolations ?? 0,
      };
    }
    return result;
  }
  const request = deps.readRequest(pod);
  if (request instanceof ValidationError) return result;
  const outcome = decidePreemption({
    preemptor: pod,
    request,
    nodes,
    holdersOn: (n) => deps.state.holdersOn(n),
    pdbs: await pdbsOrNone(deps),
    ctx: deps.fitContext(),
  });
  for (const [node, set] of outcome.chosen) {
    result.NodeNameToMetaVictims[node] = {
      Pods: set.victims.map((v) => ({ UID: v.uid })),
      NumPDBViolations: set.pdbViolations,
    };
  }
  const ref = {
    namespace: pod.metadata?.namespace ?? 'default',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
  };
  if (outcome.chosen.size > 0) deps.recordEvent(ref, eventReasons.preempting, describeVictims(outcome.chosen));
  deps.log?.('preempt', {
    pod: `${ref.namespace}/${ref.name}`,
    chosen: outcome.chosen.size,
    dropped: outcome.dropped.size,
  });
  return result;
}
