/**
 * Recent preemptions for the page, turned from Kubernetes Events: vcuda's `VcudaPreempting` on
 * the preemptor (which pods go, from which cards) and kube-scheduler's `Preempted` on each victim
 * (which pod took its place). Kept in a small ring like the refusals: Events stay the record.
 */
import { eventReasons } from '../../contract/index.js';
import { eventTimeOf, type PodEventLike } from './refusal-log.js';
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
  const obj = event.involvedObject;
  if (!role || !obj || obj.kind !== 'Pod' || !obj.name) return undefined;
  const at = eventTimeOf(event);
  if (!at) return undefined;
  return {
    at,
    role,
    ...(cluster ? { cluster } : {}),
    namespace: obj.namespace ?? '',
    pod: obj.name,
    reason: event.reason as string,
    message: event.message ?? '',
  };
}

export type PreemptionLog = {
  /** Records the Event when it is one side of a preemption; returns whether it was. */
  recordEvent(event: PodEventLike, cluster?: string): boolean;
  readPreemptions(limit: number): Promise<Preemption[]>;
};

/** A bounded log, newest first; the same pod's same Event seen again (recorded, then watched) replaces its row. */
export function createPreemptionLog(capacity = 200): PreemptionLog {
  let rows: Preemption[] = [];
  const record = (p: Preemption) => {
    rows = rows.filter(
      (x) => !(x.cluster === p.cluster && x.namespace === p.namespace && x.pod === p.pod && x.reason === p.reason),
    );
    rows.push(p);
    rows.sort((a, b) => b.at.localeCompare(a.at));
    if (rows.length > capacity) rows = rows.slice(0, capacity);
  };
  return {
    recordEvent(event, cluster) {
      const p = preemptionFromEvent(event, cluster);
      if (p) record(p);
      return p !== undefined;
    },
    async readPreemptions(limit) {
      return rows.slice(0, limit);
    },
  };
}
