/**
 * The pod-assignment holder kind: a pod holds cards through its `vcuda.io/assignment` annotation
 * once the token's signature verified and the assignment matches the pod (assignment-check.ts),
 * and until the pod finishes. Until the node agent marks the pod allocated its hold is pending.
 */
import {
  type Assignment,
  ledgerUseOfGrant,
  MIB,
  type PodLike,
  type QuantityPolicy,
  vcudaAnnotations,
} from '../../../contract/index.js';
import {
  type AssignmentJudgement,
  assignmentTokenOf,
  judgePodAssignment,
  type TokenVerdict,
} from './assignment-check.js';
import { type CardHold, coreAmountsOf, parseTimeMs, podCardUse } from './card-hold.js';

/** The parts of a pod the holds read: its spec and annotations, and its phase. */
export type HolderPod = PodLike & { status?: { phase?: string } | null };

/** A pod judged as a holder: its assignment's verdict and, once held, what it holds. */
export type PodHoldJudgement =
  | Exclude<AssignmentJudgement, { kind: 'held' }>
  | (Extract<AssignmentJudgement, { kind: 'held' }> & { hold: CardHold });

/** Whether a pod still holds what it was assigned (finished pods give their cards back). */
export function isPodHoldingCards(pod: HolderPod): boolean {
  const phase = pod.status?.phase;
  return phase !== 'Succeeded' && phase !== 'Failed';
}

/** Whether the pod carries an assignment annotation at all (verified or not). */
export function carriesAssignment(pod: PodLike): boolean {
  return assignmentTokenOf(pod) !== undefined;
}

/** The per-container core amounts an assignment waits to be allocated with (see coreAmountsOf). */
export function pendingCoreAmountsOf(assignment: Assignment): number[] {
  return coreAmountsOf(assignment.containers.map((c) => c.cards.reduce((s, g) => s + g.core, 0)));
}

/**
 * What a verified assignment holds on its node; pending until the node agent marks the pod
 * allocated. Never call it with an assignment that was only peeked (see assignment-check.ts).
 */
export function holdOfAssignment(assignment: Assignment, podAnnotations: Record<string, string>): CardHold {
  const containers = assignment.containers.map((c) => ({
    isInit: c.isInit,
    // A dynamic MIG grant holds the slice cards it covers (contract's ledgerUseOfGrant).
    cards: c.cards.flatMap((g) => ledgerUseOfGrant({ ...g, memoryMiB: Math.ceil(g.memoryBytes / MIB) })),
  }));
  const hold: CardHold = { kind: 'pod-assignment', node: assignment.node, cardUse: podCardUse(containers) };
  if (podAnnotations[vcudaAnnotations.allocatedAt]) return hold;
  return {
    ...hold,
    pending: {
      podUid: assignment.pod.uid,
      pod: `${assignment.pod.namespace}/${assignment.pod.name}`,
      coreAmounts: pendingCoreAmountsOf(assignment),
      assignedAtMs: parseTimeMs(podAnnotations[vcudaAnnotations.assignedAt]),
    },
  };
}

/** What a bind about to write `assignment` holds from now on (kube-scheduler's "assume"). */
export function assumedHoldOf(assignment: Assignment, assignedAt: string): CardHold {
  return holdOfAssignment(assignment, { [vcudaAnnotations.assignedAt]: assignedAt });
}

/**
 * Judges what a pod holds with the verdicts known now (`verdictOf` answers undefined for a token
 * not verified yet): nothing once it finished, else its assignment's judgement with the hold it
 * makes when held. Pure and synchronous. `isSpecChecked` as judgePodAssignment takes it.
 */
export function judgePodHold(
  pod: HolderPod,
  verdictOf: (token: string) => TokenVerdict | undefined,
  policy: QuantityPolicy,
  isSpecChecked = false,
): PodHoldJudgement {
  if (!isPodHoldingCards(pod)) return { kind: 'none' };
  const judged = judgePodAssignment(pod, verdictOf, policy, isSpecChecked);
  if (judged.kind !== 'held') return judged;
  return { ...judged, hold: holdOfAssignment(judged.assignment, pod.metadata?.annotations ?? {}) };
}

/**
 * The assignment the pod carries, if its signature verifies (`verify`) and it grants this pod what
 * its spec asks; undefined otherwise, and when it carries none.
 */
export async function verifiedAssignmentOf(
  pod: PodLike,
  verify: (token: string) => Promise<TokenVerdict>,
  policy: QuantityPolicy,
): Promise<Assignment | undefined> {
  const token = assignmentTokenOf(pod);
  if (!token) return undefined;
  const verdict = await verify(token);
  const judged = judgePodAssignment(pod, () => verdict, policy);
  return judged.kind === 'held' ? judged.assignment : undefined;
}
