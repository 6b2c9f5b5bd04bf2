/**
 * Events as Kubernetes' own recorders write them: the first time a pod gets a reason, an Event is
 * created; every repeat for the same pod and reason raises that Event's count, lastTimestamp and
 * series instead of creating another. The API server sees at most one write per pod per reason
 * per `intervalMs` (default a minute): repeats in between are counted and written together when
 * the interval has passed. Every component that records Events on pods (webhook, extender,
 * control plane, node agent) goes through this; contract/events.ts is the vocabulary.
 */
import {
  type EventReason,
  type PodEvent,
  type PodRef,
  podEvent,
  repeatedPodEvent,
  VcudaError,
} from '../contract/index.js';

/** How often one pod's Event for one reason may be written (created or updated). */
export const EVENT_WRITE_INTERVAL_MS = 60_000;
/** Pods and reasons remembered; the least recently seen is forgotten past it (its next repeat is a new Event). */
const DEFAULT_MAX_TRACKED = 4096;

/** Where Events go: the API server, or whatever plays it. */
export type EventWriter = {
  create(namespace: string, event: PodEvent): Promise<void>;
  /** Writes count, lastTimestamp, message and series of an existing Event; VcudaError 'not-found' when it is gone. */
  update(namespace: string, event: PodEvent): Promise<void>;
};

export type PodEventRecorder = {
  /** Never throws and never waits: write failures go to `onError`. */
  record(pod: PodRef, reason: EventReason, message: string, type?: 'Normal' | 'Warning'): void;
  /** Stops the pending writes' timers (repeats not yet written are dropped). */
  close(): void;
};

export type EventRecorderOptions = {
  writer: EventWriter;
  component: string;
  /** The replica or node, in `source.host` and `reportingInstance`. */
  host?: string;
  clock: () => Date;
  intervalMs?: number;
  maxTracked?: number;
  onError?: (err: unknown, pod: PodRef) => void;
};

/** One pod's Event for one reason, as written and as seen since. */
type Series = {
  pod: PodRef;
  first: PodEvent;
  count: number;
  last: Date;
  message: string;
  created: boolean;
  lastWriteMs: number;
  /** Seen since the last write began. */
  dirty: boolean;
  writing: boolean;
  timer: NodeJS.Timeout | undefined;
};

export function createEventRecorder(opts: EventRecorderOptions): PodEventRecorder {
  const intervalMs = opts.intervalMs ?? EVENT_WRITE_INTERVAL_MS;
  const maxTracked = opts.maxTracked ?? DEFAULT_MAX_TRACKED;
  const tracked = new Map<string, Series>();
  let seq = 0;

  function write(s: Series): void {
    s.dirty = false;
    s.writing = true;
    s.lastWriteMs = opts.clock().getTime();
    const event = repeatedPodEvent(s.first, { count: s.count, last: s.last, message: s.message });
    const namespace = s.pod.namespace;
    const created = s.created
      ? opts.writer.update(namespace, event).catch((err: unknown) => {
          // Events expire (an hour by default): a gone one is created again, with its count.
          if (err instanceof VcudaError && err.code === 'not-found') return opts.writer.create(namespace, event);
          throw err;
        })
      : opts.writer.create(namespace, event).catch((err: unknown) => {
          // A create that timed out may still have landed: the name is ours, so update it.
          if (err instanceof VcudaError && err.code === 'conflict') return opts.writer.update(namespace, event);
          throw err;
        });
    created
      .then(
        () => {
          s.created = true;
        },
        (err: unknown) => opts.onError?.(err, s.pod),
      )
      .finally(() => {
        s.writing = false;
        if (s.dirty) schedule(s);
      });
  }

  function schedule(s: Series): void {
    if (s.timer || s.writing) return;
    const wait = s.lastWriteMs + intervalMs - opts.clock().getTime();
    if (wait <= 0) {
      write(s);
      return;
    }
    s.timer = setTimeout(() => {
      s.timer = undefined;
      if (tracked.get(keyOf(s.pod, s.first.reason)) === s) write(s);
    }, wait);
    s.timer.unref?.();
  }

  function forgetOldest(): void {
    while (tracked.size > maxTracked) {
      const [key, oldest] = tracked.entries().next().value as [string, Series];
      if (oldest.timer) clearTimeout(oldest.timer);
      tracked.delete(key);
    }
  }

  return {
    record(pod, reason, message, type) {
      const now = opts.clock();
      const key = keyOf(pod, reason);
      const seen = tracked.get(key);
      if (seen) {
        // Most recently seen last: the map's order is the forgetting order.
        tracked.delete(key);
        tracked.set(key, seen);
        seen.count += 1;
        seen.last = now;
        seen.message = message;
        seen.dirty = true;
        schedule(seen);
        return;
      }
      seq += 1;
      const first = podEvent(pod, reason, message, {
        ...(type ? { type } : {}),
        component: opts.component,
        ...(opts.host ? { host: opts.host } : {}),
        now,
        nameSuffix: `${now.getTime().toString(36)}.${seq.toString(36)}${opts.host ? `.${opts.host}` : ''}`,
      });
      const s: Series = {
        pod,
        first,
        count: 1,
        last: now,
        message,
        created: false,
        lastWriteMs: 0,
        dirty: false,
        writing: false,
        timer: undefined,
      };
      tracked.set(key, s);
      forgetOldest();
      write(s);
    },
    close() {
      for (const s of tracked.values()) if (s.timer) clearTimeout(s.timer);
      tracked.clear();
    },
  };
}

/** A pod (by uid too: a new pod of the same name is another object) and a reason. */
function keyOf(pod: PodRef, reason: string): string {
  return `${pod.namespace}/${pod.name}/${pod.uid ?? ''}/${reason}`;
}
