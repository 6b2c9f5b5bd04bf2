/**
 * At most a few extender calls read and judge their bodies at once; the rest wait their turn,
 * unread, for a bounded time. kube-scheduler sends filter and prioritize from one scheduling
 * cycle at a time, so a handful is never a limit for it, while the memory one call can take
 * (a body of 5,000 node names and its answer) times the cap bounds what parallel calls can take.
 */
import { VcudaError } from '../../contract/index.js';

export type CallGateOptions = {
  /** Calls judged at once. */
  maxInFlight: number;
  /** Calls waiting at most; one more is refused at once. */
  maxWaiting: number;
  /** How long a call may wait for its turn before it is refused. */
  waitMs: number;
};

export class CallGate {
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly opts: CallGateOptions) {}

  /** Runs `work` when a slot is free; `unavailable` (503) when none frees in time or too many wait. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await work();
    } finally {
      this.release();
    }
  }

  private acquire(): Promise<void> {
    if (this.inFlight < this.opts.maxInFlight) {
      this.inFlight++;
      return Promise.resolve();
    }
    if (this.waiting.length >= this.opts.maxWaiting) {
      return Promise.reject(this.busy(`${this.waiting.length} calls already wait`));
    }
    return new Promise<void>((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const i = this.waiting.indexOf(turn);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(this.busy(`no turn within ${this.opts.waitMs} ms`));
      }, this.opts.waitMs);
      this.waiting.push(turn);
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    // The slot passes straight to the next waiter, so inFlight stays as it is.
    if (next) next();
    else this.inFlight--;
  }

  private busy(why: string): VcudaError {
    return new VcudaError('unavailable', `extender busy: ${this.opts.maxInFlight} calls in flight and ${why}`);
  }
}
