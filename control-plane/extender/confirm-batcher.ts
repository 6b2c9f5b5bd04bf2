/**
 * Group commit for the reserved -> bound step of bind. Each confirm is a durable commit, and on a
 * busy scheduler many binds finish at once: while one batch is committing, the confirms that
 * arrive queue up and go out together as the next statement. An idle extender pays no delay
 * (the first confirm goes out at once); a busy one pays one commit per batch instead of per pod.
 */

export type ConfirmMany = (podUids: readonly string[]) => Promise<{ missing: string[] }>;

/** confirmed: the rows are bound; missing: the pod held no reservation (released or expired meanwhile). */
export type ConfirmOutcome = 'confirmed' | 'missing';

type Waiter = { podUid: string; resolve: (o: ConfirmOutcome) => void; reject: (err: unknown) => void };

export type ConfirmBatcherOptions = {
  /** Tries per batch before its confirms fail (the reconcile is left to mend them). */
  attempts: number;
  backoffMs: number;
  /** Largest batch in one statement. */
  maxBatch: number;
};

const DEFAULTS: ConfirmBatcherOptions = { attempts: 3, backoffMs: 50, maxBatch: 256 };

export class ConfirmBatcher {
  private queue: Waiter[] = [];
  private flushing = false;
  private readonly options: ConfirmBatcherOptions;

  constructor(
    private readonly confirmMany: ConfirmMany,
    options: Partial<ConfirmBatcherOptions> = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  confirm(podUid: string): Promise<ConfirmOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ podUid, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.options.maxBatch);
        try {
          const missing = new Set((await this.commit(batch.map((w) => w.podUid))).missing);
          for (const w of batch) w.resolve(missing.has(w.podUid) ? 'missing' : 'confirmed');
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      this.flushing = false;
    }
  }

  private async commit(podUids: string[]): Promise<{ missing: string[] }> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.confirmMany(podUids);
      } catch (err) {
        if (attempt >= this.options.attempts) throw err;
        await new Promise((r) => setTimeout(r, this.options.backoffMs * attempt));
      }
    }
  }
}
