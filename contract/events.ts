/**
 * Kubernetes Events vcuda records on pods: one vocabulary for the webhook, the extender and the
 * node agent, so operators (and the dashboard) can filter on `reason`.
 */
export const eventReasons = {
  admissionRefused: 'VcudaAdmissionRefused',
  quotaRefused: 'VcudaQuotaRefused',
  unschedulable: 'VcudaUnschedulable',
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
const normalReasons: ReadonlySet<EventReason> = new Set([eventReasons.allocated, eventReasons.preempting]);

export type PodRef = { namespace: string; name: string; uid?: string };

/** A core/v1 Event about a pod, as vcuda writes it (a repeat raises `count` and sets `series`). */
export type PodEvent = ReturnType<typeof podEvent> & {
  series?: { count: number; lastObservedTime: string };
};

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
    message: eventMessage(message),
    type: opts.type ?? (normalReasons.has(reason) ? 'Normal' : 'Warning'),
    source: { component: opts.component, ...(opts.host ? { host: opts.host } : {}) },
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
    reportingComponent: opts.component,
    reportingInstance: opts.host ?? opts.component,
  };
}

/** Kubernetes caps event messages at 1 KiB; keep the start, which says what failed. */
function eventMessage(message: string): string {
  return message.length > 1024 ? `${message.slice(0, 1021)}...` : message;
}

/**
 * The same Event seen `count` times, the last at `last` with `message`: what Kubernetes' own
 * recorders write instead of a new Event per repeat (count, lastTimestamp, and the series).
 */
export function repeatedPodEvent(first: PodEvent, repeat: { count: number; last: Date; message: string }): PodEvent {
  const last = repeat.last.toISOString();
  return {
    ...first,
    message: eventMessage(repeat.message),
    count: repeat.count,
    lastTimestamp: last,
    // series.lastObservedTime is a MicroTime: the API server parses exactly six fraction digits.
    ...(repeat.count > 1 ? { series: { count: repeat.count, lastObservedTime: last.replace(/Z$/, '000Z') } } : {}),
  };
}
