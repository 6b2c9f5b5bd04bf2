import { describe, expect, it } from 'vitest';
import { createGroupCommit } from './group-commit.js';

type Op = { key: string; n: number };

function recorder(opts: { batchFails?: boolean; maxInFlight?: number; keyed?: boolean } = {}) {
  const batches: number[][] = [];
  const alone: number[] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const track = async <T>(run: () => T): Promise<T> => {
    inFlight += 1;
    mostInFlight = Math.max(mostInFlight, inFlight);
    await new Promise((r) => setTimeout(r, 5));
    inFlight -= 1;
    return run();
  };
  const submit = createGroupCommit<Op, string>({
    maxBatch: 3,
    maxInFlight: opts.maxInFlight,
    keyOf: opts.keyed ? (op) => op.key : undefined,
    runBatch: (ops) => {
      batches.push(ops.map((op) => op.n));
      return track(() => {
        if (opts.batchFails) throw new Error('deadlock detected');
        return ops.map((op) => `batch:${op.n}`);
      });
    },
    runOne: (op) => {
      alone.push(op.n);
      return track(() => {
        if (op.n === 13) throw new Error('pod 13 is broken');
        return `alone:${op.n}`;
      });
    },
  });
  const op = (n: number, key = `k${n}`): Op => ({ key, n });
  return { batches, alone, submit, op, mostInFlight: () => mostInFlight };
}

describe('group commit', () => {
  it('sends the calls of one turn together, in batches of at most maxBatch, one batch at a time', async () => {
    const { batches, alone, submit, op, mostInFlight } = recorder();
    const results = await Promise.all([1, 2, 3, 4, 5, 6, 7].map((n) => submit(op(n))));
    expect(batches).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(alone).toEqual([7]); // the last one had no company
    expect(results).toEqual(['batch:1', 'batch:2', 'batch:3', 'batch:4', 'batch:5', 'batch:6', 'alone:7']);
    expect(mostInFlight()).toBe(1);
  });

  it('lets the callers one batch answered go out together in the next, not the first of them alone', async () => {
    const { batches, alone, submit, op } = recorder();
    // Three callers in a loop: each submits again as soon as it has its answer.
    await Promise.all(
      [0, 1, 2].map(async (c) => {
        for (let round = 0; round < 3; round++) await submit(op(10 * round + c));
      }),
    );
    expect(alone).toEqual([]);
    expect(batches).toEqual([
      [0, 1, 2],
      [10, 11, 12],
      [20, 21, 22],
    ]);
  });

  it('keeps two operations on one key out of one batch, and in their order', async () => {
    const { batches, alone, submit, op } = recorder({ keyed: true, maxInFlight: 2 });
    const results = await Promise.all([
      submit(op(1, 'pod-a')),
      submit(op(2, 'pod-a')),
      submit(op(3, 'pod-b')),
      submit(op(4, 'pod-a')),
    ]);
    // pod-a's second operation waits until its first is answered, even with a batch slot free.
    expect(batches).toEqual([[1, 3]]);
    expect(alone).toEqual([2, 4]);
    expect(results).toEqual(['batch:1', 'alone:2', 'batch:3', 'alone:4']);
  });

  it('runs up to maxInFlight batches at once', async () => {
    const { batches, submit, op, mostInFlight } = recorder({ maxInFlight: 2 });
    await Promise.all([1, 2, 3, 4, 5, 6].map((n) => submit(op(n))));
    expect(batches).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(mostInFlight()).toBe(2);
  });

  it('runs each operation of a failed batch alone, so one failure is only its own', async () => {
    const { alone, submit, op } = recorder({ batchFails: true });
    const results = await Promise.allSettled([11, 12, 13].map((n) => submit(op(n))));
    expect(alone).toEqual([11, 12, 13]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason)))).toEqual([
      'alone:11',
      'alone:12',
      'Error: pod 13 is broken',
    ]);
  });
});
