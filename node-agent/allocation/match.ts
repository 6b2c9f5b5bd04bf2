/**
 * Which pod and container one Allocate call is for (pure).
 *
 * The kubelet's Allocate names devices, not a pod. The tie is made unambiguous by design:
 * a pod is *pending* on this node from bind until the agent writes `vcuda.io/allocated-at`, and
 * the extender never leaves two pending pods on one node whose GPU containers share a core amount
 * (equal multisets are not enough: `[30]` and `[30, 50]` both wait for 30). So the candidates are the pending pods whose next unallocated GPU container asks
 * exactly the number of core devices in the call; exactly one must remain. Zero or several is
 * a loud failure, never a guess. PreStartContainer then confirms the tie through PodResources.
 */
import { type GpuContainerView, isAllocatedByAnnotation, type PodView, podKey } from './pod-view.js';

/** Containers this agent already allocated, per pod UID. */
export type AllocationProgress = ReadonlyMap<string, ReadonlySet<string>>;

export type MatchResult =
  | { ok: true; pod: PodView; container: GpuContainerView }
  | { ok: false; reason: 'no-candidate' | 'ambiguous'; message: string; candidates: PodView[] };

/** The pod's next GPU container without an allocation, or undefined when all have one. */
export function nextContainer(pod: PodView, progress: AllocationProgress): GpuContainerView | undefined {
  const done = progress.get(pod.uid);
  return pod.gpuContainers.find((c) => !done?.has(c.name));
}

export function isPending(pod: PodView, nodeName: string, progress: AllocationProgress, refused: ReadonlySet<string>) {
  return (
    pod.nodeName === nodeName &&
    !pod.isFinished &&
    !refused.has(pod.uid) &&
    !isAllocatedByAnnotation(pod) &&
    nextContainer(pod, progress) !== undefined
  );
}

export function matchAllocate(input: {
  coreDevices: number;
  nodeName: string;
  pods: readonly PodView[];
  progress: AllocationProgress;
  /** Pods whose allocation was refused: the kubelet fails them, they never match again. */
  refused?: ReadonlySet<string>;
}): MatchResult {
  const refused = input.refused ?? new Set<string>();
  const pending = input.pods.filter((p) => isPending(p, input.nodeName, input.progress, refused));
  const candidates = pending.filter((p) => nextContainer(p, input.progress)?.core === input.coreDevices);
  if (candidates.length === 1) {
    const pod = candidates[0] as PodView;
    return { ok: true, pod, container: nextContainer(pod, input.progress) as GpuContainerView };
  }
  const keys = candidates.map(podKey).sort();
  if (candidates.length > 1) {
    return {
      ok: false,
      reason: 'ambiguous',
      candidates,
      message:
        `Allocate of ${input.coreDevices} core on node ${input.nodeName} is ambiguous: pending pods ${keys.join(', ')} ` +
        'each wait for a container of that size; refusing to guess (the extender must not leave two pending ' +
        'pods sharing a container size on a node)',
    };
  }
  const waiting = pending
    .map((p) => `${podKey(p)} (next ${nextContainer(p, input.progress)?.core} core)`)
    .sort()
    .join(', ');
  return {
    ok: false,
    reason: 'no-candidate',
    candidates: [],
    message:
      `Allocate of ${input.coreDevices} core on node ${input.nodeName}: no pending pod with a vcuda assignment ` +
      `waits for a container of that size${waiting ? `; pending: ${waiting}` : ''}`,
  };
}
