/**
 * Releases of ended pods that must not wait for the next reconcile. A pod deleted while the
 * ledger was unreachable could not be released then; its release is tried again on a short,
 * growing backoff (capped at a couple of seconds), so once the ledger is back the pod's rows go
 * within that cap instead of at the next periodic reconcile. Releasing is idempotent in the
 * ledger, so a try that did land but whose answer was lost costs nothing.
 */

export type PendingReleasesOptions = {
  /** The first retry's delay, doubled each failure up to `maxDelayMs`. */
  minDelayMs?: number;
  maxDelayMs?: number;
  /** Pods remembered at most; past it the oldest is left to the reconcile. */
  maxPending?: number;
  /** Told of each failed try (a warning once per pod is the caller's choice). */
  onError?: (podUid: string, err: unknown, attempt: number) => void;
};

export class PendingReleases {
  /** Pod UID -> how many tries failed. */
  private readonly pending = new Map<string, number>();
  private readonly trying = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private delayMs: number;
  private closed = false;
  private readonly o: Required<Omit<PendingReleasesOptions, 'onError'>>;

  constructor(
    private readonly release: (podUid: string) => Promise<unknown>,
    private readonly opts: PendingReleasesOptions = {},
  ) {
    this.o = {
      minDelayMs: opts.minDelayMs ?? 200,
      maxDelayMs: opts.maxDelayMs ?? 2000,
      maxPending: opts.maxPending ?? 10_000,
    };
    this.delayMs = this.o.minDelayMs;
  }

  /** Releases the pod now, and again until a try succeeds. */
  add(podUid: string): void {
    if (this.closed) return;
    if (!this.pending.has(podUid)) this.pending.set(podUid, 0);
    if (this.pending.size > this.o.maxPending) this.pending.delete(this.pending.keys().next().value as string);
    void this.tryOne(podUid);
  }

  /** Pods whose release has not succeeded yet. */
  size(): number {
    return this.pending.size;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private async tryOne(podUid: string): Promise<boolean> {
    if (this.trying.has(podUid)) return false;
    this.trying.add(podUid);
    try {
      await this.release(podUid);
      this.pending.delete(podUid);
      return true;
    } catch (err) {
      const attempt = (this.pending.get(podUid) ?? 0) + 1;
      if (this.pending.has(podUid)) this.pending.set(podUid, attempt);
      this.opts.onError?.(podUid, err, attempt);
      this.schedule();
      return false;
    } finally {
      this.trying.delete(podUid);
    }
  }

  private schedule(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => void this.retryAll(), this.delayMs);
    this.timer.unref();
  }

  private async retryAll(): Promise<void> {
    this.timer = undefined;
    const results = await Promise.all([...this.pending.keys()].map((uid) => this.tryOne(uid)));
    // The ledger answered: the next failure starts from the shortest delay again.
    this.delayMs = results.some(Boolean) ? this.o.minDelayMs : Math.min(this.delayMs * 2, this.o.maxDelayMs);
    if (this.pending.size > 0) this.schedule();
  }
}
