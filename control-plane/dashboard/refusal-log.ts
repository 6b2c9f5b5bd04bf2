/**
 * Recent refusals for the page: turned from Kubernetes Events (the one vocabulary in
 * contract/events.ts) or recorded directly by the control plane, and kept in a small ring so a
 * restart costs only the history a page shows, never state.
 */
import { type EventReason, eventReasons } from '../../contract/index.js';
import { createPodEventRing, type PodEventLike, podEventRow } from './pod-event-log.js';
import type { Refusal, RefusalStage } from './source.js';

const stageOfReason: Partial<Record<EventReason, RefusalStage>> = {
  [eventReasons.admissionRefused]: 'admission',
  [eventReasons.quotaRefused]: 'quota',
  [eventReasons.unschedulable]: 'scheduling',
  [eventReasons.bindConflict]: 'bind',
  [eventReasons.allocateFailed]: 'allocate',
};

/** A refusal when the Event is one of vcuda's refusal reasons about a pod; otherwise undefined. */
export function refusalFromEvent(event: PodEventLike, cluster?: string): Refusal | undefined {
  const stage = stageOfReason[event.reason as EventReason];
  const row = stage ? podEventRow(event, cluster) : undefined;
  return stage && row ? { ...row, stage } : undefined;
}

export type RefusalLog = {
  record(refusal: Refusal): void;
  /** Records the Event when it is a refusal; returns whether it was. */
  recordEvent(event: PodEventLike, cluster?: string): boolean;
  readRefusals(limit: number): Promise<Refusal[]>;
};

/** A bounded log; the same pod refused again for the same reason replaces its older row. */
export function createRefusalLog(capacity = 200): RefusalLog {
  const ring = createPodEventRing<Refusal>(capacity);
  return {
    record: ring.record,
    recordEvent(event, cluster) {
      const r = refusalFromEvent(event, cluster);
      if (r) ring.record(r);
      return r !== undefined;
    },
    async readRefusals(limit) {
      return ring.read(limit);
    },
  };
}
