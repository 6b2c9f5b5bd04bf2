/**
 * Event-loop delay read across a process boundary: a child calls `answerLagProbes()`, its parent
 * calls `measureLagOf(child)` to start a measurement and the function it returns to end and read
 * it. So a benchmark reads a component's own event loop, not its own load generator's.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { exitWithin } from './process.js';

/** A process's event-loop delay over one measurement (ms). */
export type LagReport = { p99Ms: number; maxMs: number };

/** Starts measuring this process's event-loop delay at 1 ms resolution (the benchmarks' own); the function returned stops and reads it. */
export function measureOwnLag(): () => LagReport {
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  return () => {
    lag.disable();
    return { p99Ms: lag.percentile(99) / 1e6, maxMs: lag.max / 1e6 };
  };
}

/** In the child: 'lag-start' begins a measurement (`measureOwnLag`), 'lag-stop' answers it. */
export function answerLagProbes(): void {
  let stop: (() => LagReport) | undefined;
  process.on('message', (m) => {
    if (m === 'lag-start') {
      stop?.();
      stop = measureOwnLag();
    } else if (m === 'lag-stop' && stop) {
      const report = stop();
      stop = undefined;
      process.send?.(report);
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
