/**
 * Group commit for the ledger's reservations and releases: while one transaction is committing,
 * the operations that arrive queue, and go out together as the next one (one commit, one WAL
 * flush for all of them). An idle ledger pays no delay: a lone operation goes out at once, by
 * itself, exactly as without grouping. One batch is in flight at a time, so this process's own
 * batches never wait on each other's row locks.
 *
 * When a batch fails as a whole (a deadlock with another replica, a lost connection, a bug in
 * one operation), each of its operations runs again alone, so one pod's error is that pod's.
 */

export type GroupCommitOptions<Op, Result> = {
  /** One transaction for all of `ops`; one result per operation, in order. */
  runBatch: (ops: readonly Op[]) => Promise<Result[]>;
  /** The operation alone, in its own transaction (and its own retries). */
  runOne: (op: Op) => Promise<Result>;
  /** Largest batch in one transaction: bounds how long it holds its row locks. */
  maxBatch: number;
};

type Waiter<Op, Result> = { op: Op; resolve: (r: Result) => void; reject: (err: unknown) => void };

export function createGroupCommit<Op, Result>(opts: GroupCommitOptions<Op, Result>): (op: Op) => Promise<Result> {
  const queue: Waiter<Op, Result>[] = [];
  let flushing = false;

  const settleAlone = (w: Waiter<Op, Result>) => opts.runOne(w.op).then(w.resolve, w.reject);

  async function runGroup(batch: Waiter<Op, Result>[]): Promise<void> {
    if (batch.length === 1) return settleAlone(batch[0] as Waiter<Op, Result>);
    let results: Result[];
    try {
      results = await opts.runBatch(batch.map((w) => w.op));
      if (results.length !== batch.length) throw new Error(`batch of ${batch.length} returned ${results.length}`);
    } catch {
      // Nothing of the batch committed: each operation on its own, one after another.
      for (const w of batch) await settleAlone(w);
      return;
    }
    for (const [i, w] of batch.entries()) w.resolve(results[i] as Result);
  }

  async function flush(): Promise<void> {
    flushing = true;
    try {
      while (queue.length > 0) await runGroup(queue.splice(0, opts.maxBatch));
    } finally {
      flushing = false;
    }
  }

  return (op) =>
    new Promise<Result>((resolve, reject) => {
      queue.push({ op, resolve, reject });
      if (!flushing) void flush();
    });
}
