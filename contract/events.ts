/**
 * Kubernetes Events vcuda records on pods: one vocabulary for the webhook, the extender and the
 * node agent, so operators (and the dashboard) can filter on `reason`.
 */
export const eventReasons = {
  admissionRefused: 'VcudaAdmissionRefused',
  quotaRefused: 'VcudaQuotaRefused',
  unschedulable: 'VcudaUnschedulable',
  bound: 'VcudaBound',
  bindConflict: 'VcudaBindConflict',
  allocated: 'VcudaAllocated',
  allocateFailed: 'VcudaAllocateFailed',
  released: 'VcudaReleased',
  /** A pod's assignment annotation did not verify (unsigned, forged, another pod's): it holds nothing. */
  assignmentUnverified: 'VcudaAssignmentUnverified',
  /** Lower-priority pods chosen to make room on specific cards for this pod. */
  preempting: 'VcudaPreempting',
} as const;

export type EventReason = (typeof eventReasons)[keyof typeof eventReasons];

/** Reasons that report progress, not trouble. */
const normalReasons: ReadonlySet<EventReason> = new Set([
  eventReasons.bound,
  eventReasons.allocated,
  eventReasons.preempting,
]);

export type PodRef = { namespace: string; name: string; uid?: string };

/** A core/v1 Event about a pod, ready to POST to `/api/v1/namespaces/{ns}/events`. */
export function podEvent(
  pod: PodRef,
  reason: EventReason,
  message: string,
  opts: { type?: 'Normal' | 'Warning'; component: string; host?: string; now: Date; nameSuffix: string },
) {
  const time = opts.now.toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${pod.name}.${opts.nameSuffix}`, namespace: pod.namespace },
    involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: pod.namespace, name: pod.name, uid: pod.uid },
    reason,
    // Kubernetes caps event messages at 1 KiB; keep the start, which says what failed.
    message: message.length > 1024 ? `${message.slice(0, 1021)}...` : message,
    type: opts.type ?? (normalReasons.has(reason) ? 'Normal' : 'Warning'),
    source: { component: opts.component, ...(opts.host ? { host: opts.host } : {}) },
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
    reportingComponent: opts.component,
    reportingInstance: opts.host ?? opts.component,
  };
}
