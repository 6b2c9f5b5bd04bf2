/**
 * Event-loop delay read across a process boundary: a child calls `answerLagProbes()`, its parent
 * calls `measureLagOf(child)` to start a measurement and the function it returns to end and read
 * it. So a benchmark reads a component's own event loop, not its own load generator's.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { constants, monitorEventLoopDelay, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import { exitWithin } from './process.js';

/**
 * A process's event-loop delay over one measurement (ms), and the collector's pauses of its main
 * thread meanwhile: young-generation (scavenge) pauses apart, since they are what a busy server
 * pays most often. A loop delay no pause explains is the process's own work or a wait for a core.
 */
export type LagReport = {
  p99Ms: number;
  maxMs: number;
  /** Delays recorded: one per turn of the loop at most, so a busy loop records few. */
  samples: number;
  gc: { pauses: number; totalMs: number; maxMs: number; youngPauses: number; youngTotalMs: number; youngMaxMs: number };
};

type GcPause = { ms: number; young: boolean };

/**
 * The collector's pauses of this thread from now until the function returned is called; it sums
 * them after a turn of the event loop (Node queues a pause's entry for its observers after the pause).
 */
function recordGcPauses(): () => Promise<LagReport['gc']> {
  const pauses: GcPause[] = [];
  const from = performance.now();
  let to = Number.POSITIVE_INFINITY;
  const take = (entries: readonly PerformanceEntry[]) => {
    for (const e of entries) {
      if (e.startTime < from || e.startTime >= to) continue;
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      pauses.push({ ms: e.duration, young: kind === constants.NODE_PERFORMANCE_GC_MINOR });
    }
  };
  const observer = new PerformanceObserver((list) => take(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return async () => {
    to = performance.now();
    await new Promise((resolve) => setImmediate(resolve));
    take(observer.takeRecords());
    observer.disconnect();
    const young = pauses.filter((p) => p.young);
    const sum = (ps: GcPause[]) => ps.reduce((a, p) => a + p.ms, 0);
    const max = (ps: GcPause[]) => ps.reduce((a, p) => Math.max(a, p.ms), 0);
    return {
      pauses: pauses.length,
      totalMs: sum(pauses),
      maxMs: max(pauses),
      youngPauses: young.length,
      youngTotalMs: sum(young),
      youngMaxMs: max(young),
    };
  };
}

/**
 * Starts measuring this process's event-loop delay at 1 ms resolution (the benchmarks' own) and
 * its collector's pauses; the function returned stops and reads both.
 */
export function measureOwnLag(): () => Promise<LagReport> {
  const lag = monitorEventLoopDelay({ resolution: 1 });
  const gc = recordGcPauses();
  lag.enable();
  return async () => {
    lag.disable();
    return { p99Ms: lag.percentile(99) / 1e6, maxMs: lag.max / 1e6, samples: lag.count, gc: await gc() };
  };
}

/** In the child: 'lag-start' begins a measurement (`measureOwnLag`), 'lag-stop' answers it. */
export function answerLagProbes(): void {
  let stop: (() => Promise<LagReport>) | undefined;
  process.on('message', (m) => {
    if (m === 'lag-start') {
      void stop?.();
      stop = measureOwnLag();
    } else if (m === 'lag-stop' && stop) {
      const reading = stop();
      stop = undefined;
      void reading.then((report) => process.send?.(report));
    }
  });
}

/** In the parent: starts measuring `child` (spawned with an IPC channel); the function returned stops and reads it. */
export function measureLagOf(child: ChildProcess, exited: Promise<unknown>): () => Promise<LagReport> {
  child.send('lag-start');
  return () =>
    new Promise<LagReport>((resolve, reject) => {
      child.once('message', (m) => resolve(m as LagReport));
      void exited.then(() => reject(new Error(`process ${child.pid} ended before reporting its event loop`)));
      child.send('lag-stop');
    });
}

/** A process that does nothing but answer lag probes: what the machine alone costs an event loop. */
export type IdleLagProcess = { measureLag(): () => Promise<LagReport>; close(): Promise<void> };

export async function startIdleLagProcess(): Promise<IdleLagProcess> {
  const script = join(import.meta.dirname, 'idle-lag-process.ts');
  const child = fork(script, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // It says 'ready' once it listens: a probe sent before would be lost.
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('error', reject);
    void exited.then(() => reject(new Error('idle lag process ended before it was ready')));
  });
  return {
    measureLag: () => measureLagOf(child, exited),
    async close() {
      child.disconnect();
      await exitWithin(child, exited, 5000);
    },
  };
}
