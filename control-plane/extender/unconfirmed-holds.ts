/**
 * Settling the ledger's unconfirmed holds: reservations no bind confirmed, because the replica
 * that made them died (its lease lapsed) or because they are older than the reservation timeout.
 * What happens to each is decided from the pod as the API server shows it now, never assumed:
 * a pod that runs on the hold's node with an assignment that verifies keeps it (confirmed, so the
 * ledger never under-counts a live pod); a pod that is gone, finished or bound to another node
 * frees it; a pod with no Binding frees it once its owner is dead or its time is up. Anything else
 * is kept and said.
 */
import type { Assignment } from '../../contract/index.js';
import type { LedgerHold } from '../../db/ledger-holds.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import { isPodHoldingCards } from '../placement/holds/index.js';
import { ledgerItemsOf } from './ledger-items.js';

export type SettleVerdict = { action: 'confirm' | 'release' | 'keep'; why: string };

/** Whether a hold is for settling now: unconfirmed, and its owner dead or its time up. */
export function isDueForSettling(hold: LedgerHold, nowMs: number, timeoutMs: number): boolean {
  if (hold.isBound) return false;
  return hold.isOwnerLapsed || nowMs - hold.reservedAt.getTime() > timeoutMs;
}

/** Whether the assignment grants exactly what the hold keeps, card by card. */
function sameCards(hold: LedgerHold, assignment: Assignment): boolean {
  const items = ledgerItemsOf(assignment);
  if (items.length !== hold.cards.length) return false;
  const held = new Map(hold.cards.map((c) => [c.cardUuid, c]));
  return items.every((i) => held.get(i.cardUuid)?.core === i.core && held.get(i.cardUuid)?.memoryMiB === i.memoryMiB);
}

/**
 * What to do with a hold due for settling, given its pod as just read from the API server
 * (undefined: not found) and the pod's assignment if it verified (undefined otherwise).
 */
export function settleVerdict(
  hold: LedgerHold,
  pod: PodWithStatus | undefined,
  assignment: Assignment | undefined,
): SettleVerdict {
  if (!pod || pod.metadata?.uid !== hold.podUid) return { action: 'release', why: 'the pod is gone' };
  if (!isPodHoldingCards(pod)) return { action: 'release', why: 'the pod has finished' };
  const node = pod.spec?.nodeName;
  if (node && node !== hold.node) return { action: 'release', why: `the pod is bound to ${node}` };
  if (node) {
    const runsOnIt =
      assignment?.pod.uid === hold.podUid && assignment.node === hold.node && sameCards(hold, assignment);
    return runsOnIt
      ? { action: 'confirm', why: 'the pod runs on these cards with an assignment that verifies' }
      : { action: 'keep', why: 'the pod is bound here without an assignment that verifies for these cards' };
  }
  if (hold.isOwnerLapsed) return { action: 'release', why: 'its replica is gone and the pod has no Binding' };
  return { action: 'release', why: 'the pod got no Binding within the reservation timeout' };
}

export type UnconfirmedHoldsDeps = {
  cluster: string;
  ledger: {
    confirmMany(cluster: string, podUids: readonly string[]): Promise<{ missing: string[] }>;
    releaseUnconfirmed(cluster: string, podUid: string): Promise<boolean>;
  };
  /** The pod as the API server has it now; undefined when it does not exist. Throws when unknown. */
  readPod(namespace: string, name: string): Promise<PodWithStatus | undefined>;
  /** The pod's assignment if its signature verifies and it matches the pod. */
  verifiedAssignment(pod: PodWithStatus): Promise<Assignment | undefined>;
};

export type SettleOutcome = { pod: string; podUid: string } & SettleVerdict;

/**
 * Settles one hold; a pod that cannot be read now is left for the next round. A release only
 * takes rows still `reserved`, so a bind confirming meanwhile keeps its pod held.
 */
export async function settleHold(deps: UnconfirmedHoldsDeps, hold: LedgerHold): Promise<SettleOutcome> {
  const ref = { pod: `${hold.namespace}/${hold.pod}`, podUid: hold.podUid };
  const pod = await deps.readPod(hold.namespace, hold.pod);
  const assignment = pod?.spec?.nodeName ? await deps.verifiedAssignment(pod) : undefined;
  const verdict = settleVerdict(hold, pod, assignment);
  if (verdict.action === 'confirm') {
    const { missing } = await deps.ledger.confirmMany(deps.cluster, [hold.podUid]);
    if (missing.length > 0) return { ...ref, action: 'keep', why: 'released meanwhile' };
  }
  if (verdict.action === 'release' && !(await deps.ledger.releaseUnconfirmed(deps.cluster, hold.podUid))) {
    return { ...ref, action: 'keep', why: 'confirmed or released meanwhile' };
  }
  return { ...ref, ...verdict };
}
