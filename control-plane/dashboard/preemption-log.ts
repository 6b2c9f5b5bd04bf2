/**
 * Recent preemptions for the page, turned from Kubernetes Events: vcuda's `VcudaPreempting` on
 * the preemptor (which pods go, from which cards) and kube-scheduler's `Preempted` on each victim
 * (which pod took its place). Kept in a small ring like the refusals: Events stay the record.
 */
import { eventReasons } from '../../contract/index.js';
import { createPodEventRing, type PodEventLike, podEventRow } from './pod-event-log.js';
import type { Preemption } from './source.js';

/** kube-scheduler's reason on a victim's Event (pkg/scheduler/framework/preemption). */
export const SCHEDULER_PREEMPTED_REASON = 'Preempted';

const roleOfReason: Record<string, Preemption['role']> = {
  [eventReasons.preempting]: 'preemptor',
  [SCHEDULER_PREEMPTED_REASON]: 'victim',
};

/** A preemption row when the Event is one side of a preemption of a pod; otherwise undefined. */
export function preemptionFromEvent(event: PodEventLike, cluster?: string): Preemption | undefined {
  const role = event.reason ? roleOfReason[event.reason] : undefined;
  const row = role ? podEventRow(event, cluster) : undefined;
  return role && row ? { ...row, role } : undefined;
}

export type PreemptionLog = {
  /** Records the Event when it is one side of a preemption; returns whether it was. */
  recordEvent(event: PodEventLike, cluster?: string): boolean;
  readPreemptions(limit: number): Promise<Preemption[]>;
};

/** A bounded log, newest first; the same pod's same Event seen again (recorded, then watched) replaces its row. */
export function createPreemptionLog(capacity = 200): PreemptionLog {
  const ring = createPodEventRing<Preemption>(capacity);
  return {
    recordEvent(event, cluster) {
      const p = preemptionFromEvent(event, cluster);
      if (p) ring.record(p);
      return p !== undefined;
    },
    async readPreemptions(limit) {
      return ring.read(limit);
    },
  };
}
