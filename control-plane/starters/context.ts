/** What every control-plane starter needs, and the closer each one hands back. */
import type { Logger } from 'pino';
import type { ControlPlaneConfig } from '../config.js';

export type StartContext = { config: ControlPlaneConfig; clock: () => Date; log: Logger };

export type Closer = () => Promise<void> | void;

/**
 * Closers in start order; `close` runs them in reverse, each once, and a failing step is logged
 * without stopping the ones after it (a half-stopped process must still free the rest).
 */
export function closerStack(log: Logger): { push: (c: Closer) => void; close: () => Promise<void> } {
  const closers: Closer[] = [];
  return {
    push: (c) => {
      closers.push(c);
    },
    close: async () => {
      for (const c of closers.reverse()) {
        try {
          await c();
        } catch (err) {
          log.warn({ err }, 'shutdown step failed');
        }
      }
      closers.length = 0;
    },
  };
}

/** A periodic task that does not hold the process open; its closer stops it. */
export function every(ms: number, task: () => void): Closer {
  const timer = setInterval(task, ms);
  timer.unref();
  return () => clearInterval(timer);
}
