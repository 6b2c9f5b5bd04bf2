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
  const recorder = new AggregatingRecorder(opts);
  return { record: (...args) => recorder.record(...args), close: () => recorder.close() };
}

/** The pods' series, oldest seen first (the forgetting order), and their pending writes. */
class AggregatingRecorder {
  private readonly intervalMs: number;
  private readonly maxTracked: number;
  private readonly tracked = new Map<string, Series>();
  private seq = 0;

  constructor(private readonly opts: EventRecorderOptions) {
    this.intervalMs = opts.intervalMs ?? EVENT_WRITE_INTERVAL_MS;
    this.maxTracked = opts.maxTracked ?? DEFAULT_MAX_TRACKED;
  }

  record(pod: PodRef, reason: EventReason, message: string, type?: 'Normal' | 'Warning'): void {
    const now = this.opts.clock();
    const key = keyOf(pod, reason);
    const seen = this.tracked.get(key);
    if (seen) {
      // Most recently seen last: the map's order is the forgetting order.
      this.tracked.delete(key);
      this.tracked.set(key, seen);
      seen.count += 1;
      seen.last = now;
      seen.message = message;
      seen.dirty = true;
      this.schedule(seen);
      return;
    }
    const s = this.firstSeen(pod, reason, message, type, now);
    this.tracked.set(key, s);
    this.forgetOldest();
    this.write(s);
  }

  close(): void {
    for (const s of this.tracked.values()) if (s.timer) clearTimeout(s.timer);
    this.tracked.clear();
  }

  private firstSeen(
    pod: PodRef,
    reason: EventReason,
    message: string,
    type: 'Normal' | 'Warning' | undefined,
    now: Date,
  ): Series {
    const { component, host } = this.opts;
    this.seq += 1;
    const first = podEvent(pod, reason, message, {
      ...(type ? { type } : {}),
      component,
      ...(host ? { host } : {}),
      now,
      nameSuffix: `${now.getTime().toString(36)}.${this.seq.toString(36)}${host ? `.${host}` : ''}`,
    });
    return {
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
  }

  private write(s: Series): void {
    s.dirty = false;
    s.writing = true;
    s.lastWriteMs = this.opts.clock().getTime();
    const event = repeatedPodEvent(s.first, { count: s.count, last: s.last, message: s.message });
    (s.created ? this.update(s.pod.namespace, event) : this.create(s.pod.namespace, event))
      .then(
        () => {
          s.created = true;
        },
        (err: unknown) => this.opts.onError?.(err, s.pod),
      )
      .finally(() => {
        s.writing = false;
        if (s.dirty) this.schedule(s);
      });
  }

  /** Events expire (an hour by default): a gone one is created again, with its count. */
  private update(namespace: string, event: PodEvent): Promise<void> {
    const { writer } = this.opts;
    return writer.update(namespace, event).catch((err: unknown) => {
      if (err instanceof VcudaError && err.code === 'not-found') return writer.create(namespace, event);
      throw err;
    });
  }

  /** A create that timed out may still have landed: the name is ours, so update it. */
  private create(namespace: string, event: PodEvent): Promise<void> {
    const { writer } = this.opts;
    return writer.create(namespace, event).catch((err: unknown) => {
      if (err instanceof VcudaError && err.code === 'conflict') return writer.update(namespace, event);
      throw err;
    });
  }

  private schedule(s: Series): void {
    if (s.timer || s.writing) return;
    const wait = s.lastWriteMs + this.intervalMs - this.opts.clock().getTime();
    if (wait <= 0) {
      this.write(s);
      return;
    }
    s.timer = setTimeout(() => {
      s.timer = undefined;
      if (this.tracked.get(keyOf(s.pod, s.first.reason)) === s) this.write(s);
    }, wait);
    s.timer.unref?.();
  }

  private forgetOldest(): void {
    while (this.tracked.size > this.maxTracked) {
      const [key, oldest] = this.tracked.entries().next().value as [string, Series];
      if (oldest.timer) clearTimeout(oldest.timer);
      this.tracked.delete(key);
    }
  }
}

/** A pod (by uid too: a new pod of the same name is another object) and a reason. */
function keyOf(pod: PodRef, reason: string): string {
  return `${pod.namespace}/${pod.name}/${pod.uid ?? ''}/${reason}`;
}
