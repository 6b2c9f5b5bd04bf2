/**
 * One clock for every open dashboard stream. The interval is cut into a fixed number of slots; a
 * stream joins the slot its phase draws, and each occupied slot has one timer and, per distinct
 * request (window and cluster), one load per tick. With a timer and a load per stream, 300 idle
 * pages woke the event loop the admission reviews share 150 times a second; now it wakes
 * `slots / interval` times, whatever the number of pages.
 *
 * Ticks are due at fixed times (the slot's offset plus whole intervals), so a slow load delays a
 * slot's tick but never moves the slot, and slots never merge into one burst.
 */
import type { ServerResponse } from 'node:http';
import type { SSEStreamingApi } from 'hono/streaming';
import type { Overview } from './overview.js';

/**
 * Where a stream's frames go. Under Node's HTTP server that is the response itself
 * (`nodeResponseSink`); elsewhere (tests through `app.request`, other runtimes) hono's web stream
 * (`webStreamSink`). An open stream is held for hours, so what one costs while idle is what 300
 * cost the collector: a web stream's chain (transform, readable, the server's reader loop and
 * their promises) kept about 24 KiB per stream against about 6 for the response alone, and the
 * longer major collections of the larger heap paused the admission reviews that share the thread.
 */
export type StreamSink = {
  /** False once the viewer has gone or the stream was closed. */
  isOpen(): boolean;
  /** A write the viewer has not taken yet: a slow reader skips ticks instead of queueing frames. */
  isBusy(): boolean;
  write(frame: Uint8Array | string): void;
  /** Called once, when the viewer leaves. */
  onClose(listener: () => void): void;
};

/** A Node response opened as an event stream (status and headers written here). */
export function nodeResponseSink(res: ServerResponse, headers: Record<string, string>): StreamSink {
  res.writeHead(200, {
    ...headers,
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  // Frames are small and few: send each as written, not held for Nagle.
  res.socket?.setNoDelay(true);
  return {
    isOpen: () => !res.destroyed && !res.writableEnded,
    isBusy: () => res.writableNeedDrain,
    write: (frame) => {
      res.write(frame);
    },
    onClose: (listener) => {
      res.once('close', listener);
    },
  };
}

/** hono's SSE stream (its headers are set by `streamSSE`). */
export function webStreamSink(stream: SSEStreamingApi): StreamSink {
  let writing = false;
  return {
    isOpen: () => !stream.aborted && !stream.closed,
    isBusy: () => writing,
    write: (frame) => {
      writing = true;
      void stream.write(frame).finally(() => {
        writing = false;
      });
    },
    onClose: (listener) => stream.onAbort(listener),
  };
}

/** An overview as the streams need it: its fingerprints, and the Server-Sent Event every stream writes. */
export type PrintedOverview = { print: { now: string; reports: string }; frame: () => Uint8Array };

export type StreamPacing = {
  clock: () => Date;
  /** How often a stream looks for changes. */
  intervalMs: number;
  /** Slots per interval; a slot holds every stream whose phase falls in it. */
  slots: number;
  /** A change of the reports alone is pushed at most this often. */
  reportPushMs: number;
  /** A stream silent this long gets a keep-alive comment. */
  keepAliveMs: number;
  /** Shared by every stream of the listener. */
  print: (o: Overview) => PrintedOverview;
  /** A stream's offset within the interval, a fraction in [0, 1), drawn once per stream. */
  phase: () => number;
};

const utf8 = new TextEncoder();
/** A silent stream's keep-alive: a comment line, which keeps proxies from closing an idle stream. */
const UNCHANGED_FRAME = utf8.encode(': unchanged\n\n');

/** One open stream: what it asks for and what it was last sent. */
type Viewer<R> = {
  sink: StreamSink;
  request: R;
  key: string;
  last: { now: string; reports: string };
  lastPushMs: number;
  lastWriteMs: number;
};

type Slot<R> = {
  viewers: Set<Viewer<R>>;
  timer: NodeJS.Timeout | undefined;
  ticking: boolean;
  /** The due time of its last tick (`performance.now()` scale). */
  lastDueMs: number | undefined;
};

type Outcome = { printed: PrintedOverview } | { error: unknown };

/** Writes what this tick owes the viewer, if anything; never throws, never waits for the write. */
function pushTo<R>(viewer: Viewer<R>, outcome: Outcome, pacing: StreamPacing): void {
  if (!viewer.sink.isOpen() || viewer.sink.isBusy()) return;
  let frame: Uint8Array | string | undefined;
  const nowMs = pacing.clock().getTime();
  if ('error' in outcome) {
    // The viewer is told why this tick has no overview; the next tick tries again, and pushes
    // its overview even if nothing changed meanwhile (the page shows "reconnecting" until then).
    viewer.last = { now: '', reports: '' };
    const data = JSON.stringify({ message: String(outcome.error) });
    frame = `event: failure\ndata: ${data}\n\n`;
  } else {
    const { print } = outcome.printed;
    const reportsDue = print.reports !== viewer.last.reports && nowMs - viewer.lastPushMs >= pacing.reportPushMs;
    if (print.now !== viewer.last.now || reportsDue) {
      viewer.last = print;
      viewer.lastPushMs = nowMs;
      frame = outcome.printed.frame();
    } else if (nowMs - viewer.lastWriteMs >= pacing.keepAliveMs) {
      frame = UNCHANGED_FRAME;
    }
  }
  if (frame === undefined) return;
  viewer.lastWriteMs = nowMs;
  viewer.sink.write(frame);
}

/** A tick's overview, printed, or why there is none. */
async function loadOutcome(load: () => Promise<Overview>, print: StreamPacing['print']): Promise<Outcome> {
  try {
    return { printed: print(await load()) };
  } catch (error) {
    return { error };
  }
}

/** The slot's viewers by request key: each group shares one load. */
function groupByKey<R>(viewers: Iterable<Viewer<R>>): Viewer<R>[][] {
  const groups = new Map<string, Viewer<R>[]>();
  for (const viewer of viewers) {
    const group = groups.get(viewer.key);
    if (group) group.push(viewer);
    else groups.set(viewer.key, [viewer]);
  }
  return [...groups.values()];
}

/** The first due time after `lastDueMs` (whole intervals on) that is not already past. */
function nextDueMs(lastDueMs: number, intervalMs: number, nowMs: number): number {
  const dueMs = lastDueMs + intervalMs;
  return dueMs >= nowMs ? dueMs : dueMs + Math.ceil((nowMs - dueMs) / intervalMs) * intervalMs;
}

/** The slot a phase in [0, 1) falls in; a phase outside it is clamped. */
function slotOf(phase: number, slots: number): number {
  return Math.min(slots - 1, Math.floor(slots * Math.min(Math.max(phase, 0), 1)));
}

export type StreamTicker<R> = {
  /**
   * Pushes the first overview at once (the page is waiting), then ticks the stream with its slot
   * until the viewer leaves; settles when it has left.
   */
  serve(sink: StreamSink, request: R): Promise<void>;
};

/** `keyOf` names the requests that share one load (the loader caches by the same key). */
export function streamTicker<R>(
  load: (request: R) => Promise<Overview>,
  keyOf: (request: R) => string,
  pacing: StreamPacing,
): StreamTicker<R> {
  const slotMs = pacing.intervalMs / pacing.slots;
  const originMs = performance.now();
  const slots: Slot<R>[] = Array.from({ length: pacing.slots }, () => ({
    viewers: new Set(),
    timer: undefined,
    ticking: false,
    lastDueMs: undefined,
  }));

  const loadFor = (request: R) => loadOutcome(() => load(request), pacing.print);

  const tick = async (slot: Slot<R>) => {
    await Promise.all(
      groupByKey(slot.viewers).map(async (viewers) => {
        const outcome = await loadFor((viewers[0] as Viewer<R>).request);
        for (const viewer of viewers) pushTo(viewer, outcome, pacing);
      }),
    );
  };

  /**
   * Arms the slot's timer for its next due time after the last one it ticked at, unless it has one,
   * is ticking or is empty. Due times are counted, not derived from the clock at arming: a timer
   * fires up to a millisecond early by `performance.now()`, which would read as "due again now".
   */
  const arm = (index: number) => {
    const slot = slots[index] as Slot<R>;
    if (slot.timer || slot.ticking || slot.viewers.size === 0) return;
    const nowMs = performance.now();
    const dueMs = nextDueMs(slot.lastDueMs ?? originMs + index * slotMs - pacing.intervalMs, pacing.intervalMs, nowMs);
    slot.timer = setTimeout(() => {
      slot.timer = undefined;
      slot.lastDueMs = dueMs;
      slot.ticking = true;
      void tick(slot).finally(() => {
        slot.ticking = false;
        arm(index);
      });
    }, dueMs - nowMs);
  };

  return {
    async serve(sink, request) {
      const viewer: Viewer<R> = {
        sink,
        request,
        key: keyOf(request),
        last: { now: '', reports: '' },
        lastPushMs: Number.NEGATIVE_INFINITY,
        lastWriteMs: Number.NEGATIVE_INFINITY,
      };
      const left = new Promise<void>((resolve) => sink.onClose(resolve));
      pushTo(viewer, await loadFor(request), pacing);
      if (!sink.isOpen()) return;
      const index = slotOf(pacing.phase(), pacing.slots);
      const slot = slots[index] as Slot<R>;
      slot.viewers.add(viewer);
      arm(index);
      try {
        await left;
      } finally {
        slot.viewers.delete(viewer);
        if (slot.viewers.size === 0 && slot.timer) {
          clearTimeout(slot.timer);
          slot.timer = undefined;
        }
      }
    },
  };
}
