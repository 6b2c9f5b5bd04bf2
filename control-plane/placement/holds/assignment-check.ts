/**
 * Whether a pod's assignment annotation may count as cards held: its signature verified (the
 * verdict comes from AssignmentTrust, which verifies asynchronously and caches by token), it names
 * this very pod and the node the pod is bound to, and the pod's own spec asks for exactly the
 * containers, cards, core and memory it grants. Anything else is hostile or stale and holds nothing.
 */
import {
  type Assignment,
  type AssignmentErrorCode,
  type ContainerGpuRequest,
  type ContainerGrant,
  MIB,
  type PodLike,
  type QuantityPolicy,
  readPodGpuRequest,
  ValidationError,
  vcudaAnnotations,
} from '../../../contract/index.js';

/** Why an assignment annotation holds nothing: the signature's verdict, or a mismatch with the pod. */
export type UnverifiedReason = AssignmentErrorCode | 'spec-mismatch';

/** What verifying one token's signature found (independent of the pod carrying it). */
export type TokenVerdict =
  | { ok: true; assignment: Assignment }
  | { ok: false; reason: UnverifiedReason; message: string };

/** A pod's assignment, judged. */
export type AssignmentJudgement =
  | { kind: 'none' }
  /** Its signature is not verified yet: holds nothing until it is. */
  | { kind: 'unknown'; token: string }
  | { kind: 'refused'; token: string; reason: UnverifiedReason; message: string }
  | { kind: 'held'; token: string; assignment: Assignment };

/** The assignment token a pod carries (unverified: hostile until judged), or undefined. */
export function assignmentTokenOf(pod: PodLike): string | undefined {
  return pod.metadata?.annotations?.[vcudaAnnotations.assignment] || undefined;
}

/** Every vcuda container of a pod, keyed the way grants are matched to requests. */
function containerKey(c: { name: string; isInit: boolean }): string {
  return `${c.isInit ? 'init' : 'app'}/${c.name}`;
}

function grantMismatch(req: ContainerGpuRequest, grant: ContainerGrant): string | undefined {
  const what = `container ${grant.name}`;
  if (grant.cards.length !== req.cards) return `${what}: grants ${grant.cards.length} cards, asks ${req.cards}`;
  if (new Set(grant.cards.map((g) => g.uuid)).size !== grant.cards.length) return `${what}: grants a card twice`;
  for (const g of grant.cards) {
    if (g.mig?.profile !== req.mig) {
      const grants = g.mig ? `MIG ${g.mig.profile} instance ${g.uuid}` : `card ${g.uuid}`;
      return `${what}: grants ${grants}, asks ${req.mig ? `MIG ${req.mig} instances` : 'cards'}`;
    }
    if (g.core !== req.corePerCard) return `${what}: grants core ${g.core} on ${g.uuid}, asks ${req.corePerCard}`;
    // Whole cards without a stated memory take the card's memory, whatever it is.
    if (req.memoryMiBPerCard !== undefined && g.memoryBytes !== req.memoryMiBPerCard * MIB) {
      return `${what}: grants ${g.memoryBytes / MIB} MiB on ${g.uuid}, asks ${req.memoryMiBPerCard} MiB`;
    }
  }
  return undefined;
}

/**
 * Why the assignment's grants differ from what the pod's spec asks (containers, cards per
 * container, core and memory per card), or undefined when they agree.
 */
export function assignmentSpecMismatch(
  pod: PodLike,
  assignment: Assignment,
  policy: QuantityPolicy,
): string | undefined {
  let requested: readonly ContainerGpuRequest[];
  try {
    requested = readPodGpuRequest(pod, policy).containers;
  } catch (err) {
    if (err instanceof ValidationError) return `the pod's GPU request is invalid: ${err.message}`;
    throw err;
  }
  const grants = new Map(assignment.containers.map((g) => [containerKey(g), g]));
  if (grants.size !== assignment.containers.length) return 'grants one container twice';
  if (requested.length !== grants.size) {
    return `grants ${grants.size} GPU containers, the pod's spec asks for ${requested.length}`;
  }
  for (const req of requested) {
    const grant = grants.get(containerKey(req));
    if (!grant) return `the pod's ${req.isInit ? 'init ' : ''}container ${req.name} has no grant`;
    const why = grantMismatch(req, grant);
    if (why) return why;
  }
  return undefined;
}

/** The rest of judgePodAssignment, once the signature verified. */
function checkAgainstPod(pod: PodLike, a: Assignment, policy: QuantityPolicy, isSpecChecked: boolean): TokenVerdict {
  const m = pod.metadata;
  if (a.pod.uid !== m?.uid || a.pod.namespace !== m?.namespace || a.pod.name !== m?.name) {
    return {
      ok: false,
      reason: 'wrong-pod',
      message: `the assignment is for pod ${a.pod.namespace}/${a.pod.name} (${a.pod.uid}), not this one`,
    };
  }
  const boundTo = pod.spec?.nodeName;
  if (boundTo && boundTo !== a.node) {
    return {
      ok: false,
      reason: 'wrong-node',
      message: `the assignment is for node ${a.node}, the pod runs on ${boundTo}`,
    };
  }
  const mismatch = isSpecChecked ? undefined : assignmentSpecMismatch(pod, a, policy);
  if (mismatch) return { ok: false, reason: 'spec-mismatch', message: `the assignment ${mismatch}` };
  return { ok: true, assignment: a };
}

/**
 * Judges the assignment annotation a pod carries, given what is known of its token's signature
 * (`verdictOf` answers undefined while it is not verified yet). Pure and synchronous.
 * `isSpecChecked`: the caller already found this assignment agreeing with a copy of the pod that
 * asks the same (gpuRequestInputsOf), so the spec is not read again; the pod and node still are.
 */
export function judgePodAssignment(
  pod: PodLike,
  verdictOf: (token: string) => TokenVerdict | undefined,
  policy: QuantityPolicy,
  isSpecChecked = false,
): AssignmentJudgement {
  const token = assignmentTokenOf(pod);
  if (!token) return { kind: 'none' };
  const verdict = verdictOf(token);
  if (!verdict) return { kind: 'unknown', token };
  const checked = verdict.ok ? checkAgainstPod(pod, verdict.assignment, policy, isSpecChecked) : verdict;
  return checked.ok
    ? { kind: 'held', token, assignment: checked.assignment }
    : { kind: 'refused', token, reason: checked.reason, message: checked.message };
}
