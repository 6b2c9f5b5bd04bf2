/**
 * What the page's Event-backed lists share: a core/v1 Event about a pod turned into a row, and a
 * small ring of rows, newest first, where the same pod's same reason replaces its older row. The
 * refusal and preemption logs differ only in which reasons they keep and what they call them.
 */

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

/** The columns every Event-backed row has. */
export type PodEventRow = {
  /** ISO-8601. */
  at: string;
  cluster?: string;
  namespace: string;
  pod: string;
  reason: string;
  message: string;
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

/** The shared columns when the Event is about a named pod and carries a time; otherwise undefined. */
export function podEventRow(event: PodEventLike, cluster?: string): PodEventRow | undefined {
  const obj = event.involvedObject;
  if (!event.reason || !obj || obj.kind !== 'Pod' || !obj.name) return undefined;
  const at = eventTimeOf(event);
  if (!at) return undefined;
  return {
    at,
    ...(cluster ? { cluster } : {}),
    namespace: obj.namespace ?? '',
    pod: obj.name,
    reason: event.reason,
    message: event.message ?? '',
  };
}

export type PodEventRing<R extends PodEventRow> = {
  record(row: R): void;
  read(limit: number): R[];
};

/** A bounded ring, newest first; the same pod's same reason seen again replaces its older row. */
export function createPodEventRing<R extends PodEventRow>(capacity: number): PodEventRing<R> {
  let rows: R[] = [];
  return {
    record(row) {
      rows = rows.filter(
        (x) =>
          !(x.cluster === row.cluster && x.namespace === row.namespace && x.pod === row.pod && x.reason === row.reason),
      );
      rows.push(row);
      rows.sort((a, b) => b.at.localeCompare(a.at));
      if (rows.length > capacity) rows = rows.slice(0, capacity);
    },
    read(limit) {
      return rows.slice(0, limit);
    },
  };
}
