/**
 * The periodic reconcile of the ledger with this cluster's pods, both ways. Rows of pods that no
 * longer exist are released (the ledger does that, judging only rows older than the pod list).
 * A pod that runs on its cards while the ledger holds nothing for it (rows lost to an operator's
 * hand, a restored backup, a bug) is put back from its signed assignment, so capacity and quotas
 * count what really runs; if its cards or quota are taken meanwhile, that is reported, not hidden.
 * Only an assignment the cluster view holds as verified is put back: an annotation anyone could
 * write never reserves a card.
 * Allocated pods are marked so, so their sizes stop being pending on their nodes.
 */
import { type Assignment, VcudaError, vcudaAnnotations } from '../../contract/index.js';
import type { ClusterState } from '../cluster-state.js';
import type { NodeSnapshot, PodWithStatus } from '../placement/cluster-snapshot.js';
import { isPodHoldingCards } from '../placement/holds/index.js';
import type { BindLedger } from './binder.js';
import { type LedgerItem, ledgerItemsOf } from './ledger-items.js';

export type LivePod = { uid: string; namespace: string; name: string };

export type ReconcileLedger = Pick<BindLedger, 'reserve' | 'confirmMany'> & {
  markAllocated(cluster: string, podUids: readonly string[]): Promise<void>;
  reconcile(
    cluster: string,
    livePods: LivePod[],
    options?: { listedAt?: Date },
  ): Promise<{ released: string[]; missingFromLedger: LivePod[] }>;
};

export type RestorePlan = {
  podUid: string;
  namespace: string;
  pod: string;
  node: string;
  items: LedgerItem[];
};

export type ReconcileOutcome = {
  released: string[];
  restored: string[];
  /** Running pods the ledger could not take back, with the ledger's reason. */
  refused: { pod: string; message: string }[];
};

/**
 * Which of the pods the ledger lacks should be put back: bound to the node of their verified
 * assignment (`verifiedOf`: signed by us and matching the pod, see placement/holds/), still
 * running, and assigned longer ago than `graceMs` (a bind in flight reserves before it writes the
 * assignment, so a younger one may simply not be confirmed yet).
 */
export function podsToRestore(
  missing: readonly LivePod[],
  podOf: (namespace: string, name: string) => PodWithStatus | undefined,
  verifiedOf: (namespace: string, name: string) => Assignment | undefined,
  nowMs: number,
  graceMs: number,
): RestorePlan[] {
  const plans: RestorePlan[] = [];
  for (const m of missing) {
    const pod = podOf(m.namespace, m.name);
    if (!pod || pod.metadata?.uid !== m.uid || !isPodHoldingCards(pod)) continue;
    const annotations = pod.metadata?.annotations ?? {};
    const assignment = verifiedOf(m.namespace, m.name);
    if (!assignment || assignment.pod.uid !== m.uid || pod.spec?.nodeName !== assignment.node) continue;
    const assignedAtMs = Date.parse(annotations[vcudaAnnotations.assignedAt] ?? '');
    if (!Number.isFinite(assignedAtMs) || nowMs - assignedAtMs < graceMs) continue;
    plans.push({
      podUid: m.uid,
      namespace: m.namespace,
      pod: m.name,
      node: assignment.node,
      items: ledgerItemsOf(assignment),
    });
  }
  return plans;
}

export type LedgerReconcilerDeps = {
  cluster: string;
  ledger: ReconcileLedger;
  state: ClusterState;
  /** Makes sure the ledger knows a node's cards before rows naming them are written. */
  ensureNode: (node: NodeSnapshot) => Promise<void>;
  clock: () => Date;
  /** Rows and assignments younger than this are left to the bind that is making them. */
  graceMs: number;
};

export async function reconcileLedger(deps: LedgerReconcilerDeps): Promise<ReconcileOutcome> {
  const { cluster, ledger, state } = deps;
  const live: LivePod[] = [];
  // Allocations this replica did not see happen (it was down, or the write failed) stop
  // counting as pending sizes in the ledger; the pods already marked are untouched.
  const allocated: string[] = [];
  for (const p of state.allPods()) {
    if (!isPodHoldingCards(p)) continue;
    const uid = p.metadata?.uid ?? '';
    live.push({ uid, namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' });
    if (p.metadata?.annotations?.[vcudaAnnotations.allocatedAt]) allocated.push(uid);
  }
  const nowMs = deps.clock().getTime();
  const { released, missingFromLedger } = await ledger.reconcile(cluster, live, {
    listedAt: new Date(nowMs - deps.graceMs),
  });
  await ledger.markAllocated(cluster, allocated);
  const outcome: ReconcileOutcome = { released, restored: [], refused: [] };
  const plans = podsToRestore(
    missingFromLedger,
    (ns, name) => state.pod(ns, name),
    (ns, name) => state.heldAssignment(ns, name),
    nowMs,
    deps.graceMs,
  );
  for (const plan of plans) {
    const ref = `${plan.namespace}/${plan.pod}`;
    try {
      const node = state.snapshot().nodes.get(plan.node);
      if (node) await deps.ensureNode(node);
      const { reused } = await ledger.reserve({ cluster, ...plan });
      // Held meanwhile: a bind of this very pod got there first, and it confirms its own rows.
      if (reused) continue;
      await ledger.confirmMany(cluster, [plan.podUid]);
      outcome.restored.push(ref);
    } catch (err) {
      if (!(err instanceof VcudaError)) throw err;
      outcome.refused.push({ pod: ref, message: err.message });
    }
  }
  return outcome;
}
