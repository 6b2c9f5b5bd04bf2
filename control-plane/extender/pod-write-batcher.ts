/**
 * Group commit for one kind of per-pod ledger write (bind's reserved -> bound, the node agent's
 * allocation of a pod). Each write is a durable commit, and on a busy scheduler many arrive at
 * once: while one batch is committing, the writes that arrive queue up and go out together as
 * the next statement. An idle extender pays no delay (the first write goes out at once); a busy
 * one pays one commit per batch instead of per pod.
 */

export type WriteMany = (podUids: readonly string[]) => Promise<{ missing: string[] }>;

/** written: the pod's rows took the write; missing: the pod held none (released or expired meanwhile). */
export type WriteOutcome = 'written' | 'missing';

type Waiter = { podUid: string; resolve: (o: WriteOutcome) => void; reject: (err: unknown) => void };

export type PodWriteBatcherOptions = {
  /** Tries per batch before its writes fail (the reconcile is left to mend them). */
  attempts: number;
  backoffMs: number;
  /** Largest batch in one statement. */
  maxBatch: number;
};

const DEFAULTS: PodWriteBatcherOptions = { attempts: 3, backoffMs: 50, maxBatch: 256 };

export class PodWriteBatcher {
  private queue: Waiter[] = [];
  private flushing = false;
  /** The flush under way (resolved when none). */
  private flushed: Promise<void> = Promise.resolve();
  private readonly options: PodWriteBatcherOptions;

  constructor(
    private readonly writeMany: WriteMany,
    options: Partial<PodWriteBatcherOptions> = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  write(podUid: string): Promise<WriteOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ podUid, resolve, reject });
      if (!this.flushing) this.flushed = this.flush();
    });
  }

  /** Resolves once every write queued so far has been committed or has failed (for shutdown). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushed;
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.options.maxBatch);
        try {
          const missing = new Set((await this.commit(batch.map((w) => w.podUid))).missing);
          for (const w of batch) w.resolve(missing.has(w.podUid) ? 'missing' : 'written');
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
        return await this.writeMany(podUids);
      } catch (err) {
        if (attempt >= this.options.attempts) throw err;
        await new Promise((r) => setTimeout(r, this.options.backoffMs * attempt));
      }
    }
  }
}
