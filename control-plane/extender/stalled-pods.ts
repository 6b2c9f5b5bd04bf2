/**
 * The pods kube-scheduler holds as unschedulable, found from the watch cache rather than from a
 * replica's memory: a restarted or surviving replica nudges the pods another process refused.
 *
 * kube-scheduler 1.32 (verified against the binary): a pod the extender refused (FailedNodes) is
 * parked in its unschedulable pool with `PodScheduled=False, reason Unschedulable`, and leaves it on
 * a cluster event (a Node update, an assigned pod added or finishing, an update of the pod itself),
 * or after `podMaxInUnschedulablePodsDuration` (5 min). Then it waits out its backoff
 * (`podInitialBackoffSeconds` doubling per attempt up to `podMaxBackoffSeconds`). A pod the extender
 * could not be reached for (`connection refused`) is not parked: it is retried after its backoff.
 */
import { type ResourceNames, requestsGpu } from '../../contract/index.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import type { NudgeTarget } from './nudger.js';

type Condition = { type?: string; status?: string; reason?: string };

function isParkedUnschedulable(pod: PodWithStatus): boolean {
  const conditions = ((pod.status as { conditions?: Condition[] } | null | undefined)?.conditions ?? []) as Condition[];
  return conditions.some((c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable');
}

/** Pending vcuda pods (ours by scheduler name or by resource) that kube-scheduler parked as unschedulable. */
export function stalledPods(
  pods: Iterable<PodWithStatus>,
  ours: { names: ResourceNames; schedulerName?: string | undefined },
): NudgeTarget[] {
  const out: NudgeTarget[] = [];
  for (const pod of pods) {
    const meta = pod.metadata;
    const spec = pod.spec as { nodeName?: string; schedulerName?: string } | undefined;
    if (!meta?.uid || !meta.name || !meta.namespace || spec?.nodeName || meta.deletionTimestamp) continue;
    if ((pod.status?.phase ?? 'Pending') !== 'Pending' || !isParkedUnschedulable(pod)) continue;
    const byScheduler = ours.schedulerName !== undefined && spec?.schedulerName === ours.schedulerName;
    if (!byScheduler && !requestsGpu(pod, ours.names)) continue;
    out.push({ namespace: meta.namespace, name: meta.name, uid: meta.uid });
  }
  return out;
}
