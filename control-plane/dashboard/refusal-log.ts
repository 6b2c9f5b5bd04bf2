/**
 * Recent refusals for the page: turned from Kubernetes Events (the one vocabulary in
 * contract/events.ts) or recorded directly by the control plane, and kept in a small ring so a
 * restart costs only the history a page shows, never state.
 */
import { type EventReason, eventReasons } from '../../contract/index.js';
import type { Refusal, RefusalStage } from './source.js';

const stageOfReason: Partial<Record<EventReason, RefusalStage>> = {
  [eventReasons.admissionRefused]: 'admission',
  [eventReasons.quotaRefused]: 'quota',
  [eventReasons.unschedulable]: 'scheduling',
  [eventReasons.bindConflict]: 'bind',
  [eventReasons.allocateFailed]: 'allocate',
};

/** The fields of a core/v1 Event the page needs; both the client library's and raw JSON fit. */
export type PodEventLike = {
  reason?: string;
  message?: string;
  involvedObject?: { kind?: string; namespace?: string; name?: string };
  lastTimestamp?: string | Date | null;
  eventTime?: string | Date | null;
  firstTimestamp?: string | Date | null;
  metadata?: { name?: string; creationTimestamp?: string | Date | null };
};

function isoOf(t: string | Date | null | undefined): string | undefined {
  if (!t) return undefined;
  const d = t instanceof Date ? t : new Date(t);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** When the Event last happened, ISO-8601; undefined when it carries no readable time. */
export function eventTimeOf(event: PodEventLike): string | undefined {
  return (
    isoOf(event.lastTimestamp) ??
    isoOf(event.eventTime) ??
    isoOf(event.firstTimestamp) ??
    isoOf(event.metadata?.creationTimestamp)
  );
}

/** A refusal when the Event is one of vcuda's refusal reasons about a pod; otherwise undefined. */
export function refusalFromEvent(event: PodEventLike, cluster?: string): Refusal | undefined {
  const stage = stageOfReason[event.reason as EventReason];
  const obj = event.involvedObject;
  if (!stage || !obj || obj.kind !== 'Pod' || !obj.name) return undefined;
  const at = eventTimeOf(event);
  if (!at) return undefined;
  return {
    at,
    stage,
    ...(cluster ? { cluster } : {}),
    namespace: obj.namespace ?? '',
    pod: obj.name,
    reason: event.reason as string,
    message: event.message ?? '',
  };
}

export type RefusalLog = {
  record(refusal: Refusal): void;
  /** Records the Event when it is a refusal; returns whether it was. */
  recordEvent(event: PodEventLike, cluster?: string): boolean;
  readRefusals(limit: number): Promise<Refusal[]>;
};

/** A bounded log; the same pod refused again for the same reason replaces its older row. */
export function createRefusalLog(capacity = 200): RefusalLog {
  let rows: Refusal[] = [];
  const record = (r: Refusal) => {
    rows = rows.filter(
      (x) => !(x.cluster === r.cluster && x.namespace === r.namespace && x.pod === r.pod && x.reason === r.reason),
    );
    rows.push(r);
    rows.sort((a, b) => b.at.localeCompare(a.at));
    if (rows.length > capacity) rows = rows.slice(0, capacity);
  };
  return {
    record,
    recordEvent(event, cluster) {
      const r = refusalFromEvent(event, cluster);
      if (r) record(r);
      return r !== undefined;
    },
    async readRefusals(limit) {
      return rows.slice(0, limit);
    },
  };
}
