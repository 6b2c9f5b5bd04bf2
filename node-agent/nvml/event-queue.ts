/**
 * Driver events (Xids, lost cards) injected by hand, as the in-memory GpuSources of tests and
 * the simulator deliver them: `emit` queues one, `wait` resolves with the next, or undefined on
 * timeout, abort or close — the contract of `GpuSource.waitEvent`.
 */
import type { GpuEvent } from './gpu-source.js';

export class GpuEventQueue {
  private readonly pending: GpuEvent[] = [];
  private waiter: ((e: GpuEvent | undefined) => void) | undefined;
  private isClosed = false;

  get closed(): boolean {
    return this.isClosed;
  }

  emit(event: GpuEvent): void {
    const w = this.waiter;
    this.waiter = undefined;
    if (w) w(event);
    else this.pending.push(event);
  }

  wait(timeoutMs: number, signal?: AbortSignal): Promise<GpuEvent | undefined> {
    const next = this.pending.shift();
    if (next || this.isClosed || signal?.aborted) return Promise.resolve(next);
    return new Promise((resolve) => {
      const finish = (e: GpuEvent | undefined) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waiter = undefined;
        resolve(e);
      };
      const onAbort = () => finish(undefined);
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      signal?.addEventListener('abort', onAbort);
      this.waiter = finish;
    });
  }

  close(): void {
    this.isClosed = true;
    this.waiter?.(undefined);
    this.waiter = undefined;
  }
}
