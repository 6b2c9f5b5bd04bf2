/**
 * Group commit for the ledger's reservations and releases: the operations that arrive while a
 * batch is in flight queue, and go out together as the next batch (one transaction, one round
 * trip, one WAL flush for all of them). A batch leaves once the calls made in the same turn of
 * the event loop have joined it (`setImmediate`), so an idle ledger adds no delay and callers
 * resumed together by one batch's answer go out together in the next, instead of the first of
 * them alone. At most `maxInFlight` batches are out at once; a lone operation goes by itself.
 *
 * Each key (a pod) appears at most once per batch: a second operation on it waits for the next
 * batch, so the order of one pod's operations is the order they were made in.
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
  /** Batches out at once (default 1). */
  maxInFlight?: number;
  /** Operations with the same key never share a batch (default: every operation its own key). */
  keyOf?: (op: Op) => string;
};

type Waiter<Op, Result> = { op: Op; resolve: (r: Result) => void; reject: (err: unknown) => void };

export function createGroupCommit<Op, Result>(opts: GroupCommitOptions<Op, Result>): (op: Op) => Promise<Result> {
  const maxInFlight = opts.maxInFlight ?? 1;
  let queue: Waiter<Op, Result>[] = [];
  let inFlight = 0;
  let scheduled = false;
  /** Keys of the operations out now: a later operation on one waits until they are answered. */
  const busyKeys = new Set<string>();

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

  /** The next batch: queued operations in order, up to maxBatch, one per key and none on a busy key. */
  function takeBatch(): { batch: Waiter<Op, Result>[]; keys: string[] } {
    const keyOf = opts.keyOf;
    if (!keyOf) return { batch: queue.splice(0, opts.maxBatch), keys: [] };
    const batch: Waiter<Op, Result>[] = [];
    const rest: Waiter<Op, Result>[] = [];
    const taken = new Set<string>();
    for (const w of queue) {
      const key = keyOf(w.op);
      if (batch.length < opts.maxBatch && !taken.has(key) && !busyKeys.has(key)) batch.push(w);
      else rest.push(w); // behind an earlier operation on its key, or the batch is full
      taken.add(key);
    }
    queue = rest;
    return { batch, keys: batch.map((w) => keyOf(w.op)) };
  }

  function dispatch(): void {
    scheduled = false;
    while (inFlight < maxInFlight && queue.length > 0) {
      const { batch, keys } = takeBatch();
      if (batch.length === 0) return; // every queued key is busy: the answer that frees one reschedules
      inFlight += 1;
      for (const key of keys) busyKeys.add(key);
      void runGroup(batch).finally(() => {
        inFlight -= 1;
        for (const key of keys) busyKeys.delete(key);
        schedule();
      });
    }
  }

  function schedule(): void {
    if (scheduled || queue.length === 0 || inFlight >= maxInFlight) return;
    scheduled = true;
    setImmediate(dispatch);
  }

  return (op) =>
    new Promise<Result>((resolve, reject) => {
      queue.push({ op, resolve, reject });
      schedule();
    });
}
