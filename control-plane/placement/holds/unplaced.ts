/**
 * GPU pods that sit on a node holding nothing: placed by hand (`spec.nodeName`) around admission and
 * the extender, with no assignment or one that did not verify. The node agent's Allocate refuses
 * them and the kubelet fails them (UnexpectedAdmissionError); until then kube-scheduler still counts
 * what they ask on their node while the ledger shows it free, so operators need to see them.
 */
import { type PodLike, type ResourceNames, requestsGpu } from '../../../contract/index.js';
import { carriesAssignment } from './pod-assignment.js';

/** Why the pod holds nothing: no assignment, one that is not (or not yet) verified, or the kubelet refused it. */
export type UnplacedReason = 'no-assignment' | 'assignment-not-verified' | 'refused-by-kubelet';

export type UnplacedPod = { namespace: string; pod: string; node: string; phase: string; reason: UnplacedReason };

/** The pod as the cluster view keeps it, with the status fields the kubelet's refusal shows in. */
export type UnplacedCandidate = PodLike & { status?: { phase?: string; reason?: string } | null };

/**
 * The pod as an unplaced GPU pod, or undefined: one not on a node, asking no vcuda resource,
 * finished normally, or holding cards (`isHeld`: through its verified assignment or a ledger hold).
 */
export function unplacedPodOf(pod: UnplacedCandidate, names: ResourceNames, isHeld: boolean): UnplacedPod | undefined {
  const node = pod.spec?.nodeName;
  if (!node || isHeld || !requestsGpu(pod, names)) return undefined;
  const phase = pod.status?.phase ?? 'Pending';
  if (phase === 'Succeeded') return undefined;
  // A failed pod counts only when the kubelet refused it at admission (a device plugin's Allocate).
  if (phase === 'Failed' && pod.status?.reason !== 'UnexpectedAdmissionError') return undefined;
  const reason: UnplacedReason =
    phase === 'Failed' ? 'refused-by-kubelet' : carriesAssignment(pod) ? 'assignment-not-verified' : 'no-assignment';
  return { namespace: pod.metadata?.namespace ?? '', pod: pod.metadata?.name ?? '', node, phase, reason };
}
