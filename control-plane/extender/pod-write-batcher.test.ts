import { describe, expect, it } from 'vitest';
import { PodWriteBatcher } from './pod-write-batcher.js';

/** A write that commits when the test says, recording each statement's pods. */
function gatedLedger(held: Set<string>) {
  const statements: string[][] = [];
  const gates: (() => void)[] = [];
  const writeMany = async (uids: readonly string[]) => {
    statements.push([...uids]);
    await new Promise<void>((open) => gates.push(open));
    return { missing: uids.filter((u) => !held.has(u)) };
  };
  const openNext = async () => {
    while (gates.length === 0) await new Promise((r) => setTimeout(r, 1));
    gates.shift()?.();
  };
  return { writeMany, statements, openNext };
}

describe('PodWriteBatcher', () => {
  it('sends the first write at once and the ones arriving meanwhile as one statement', async () => {
    const ledger = gatedLedger(new Set(['a', 'b', 'c', 'd']));
    const batcher = new PodWriteBatcher(ledger.writeMany);
    const first = batcher.write('a');
    const rest = ['b', 'c', 'd'].map((u) => batcher.write(u));
    expect(ledger.statements).toEqual([['a']]);
    await ledger.openNext();
    expect(await first).toBe('written');
    await ledger.openNext();
    expect(await Promise.all(rest)).toEqual(['written', 'written', 'written']);
    expect(ledger.statements).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('tells each caller whether its pod still held rows', async () => {
    const ledger = gatedLedger(new Set(['kept']));
    const batcher = new PodWriteBatcher(ledger.writeMany);
    const outcomes = Promise.all([batcher.write('kept'), batcher.write('expired')]);
    await ledger.openNext();
    await ledger.openNext();
    expect(await outcomes).toEqual(['written', 'missing']);
  });

  it('retries a failed statement, then fails only that batch and keeps serving', async () => {
    let calls = 0;
    const batcher = new PodWriteBatcher(
      async (uids) => {
        calls++;
        if (uids.includes('doomed')) throw new Error('connection reset');
        return { missing: [] };
      },
      { attempts: 3, backoffMs: 1 },
    );
    await expect(batcher.write('doomed')).rejects.toThrow('connection reset');
    expect(calls).toBe(3);
    expect(await batcher.write('next')).toBe('written');
  });

  it('splits a long queue into statements of at most maxBatch pods', async () => {
    const sizes: number[] = [];
    const batcher = new PodWriteBatcher(
      async (uids) => {
        sizes.push(uids.length);
        await new Promise((r) => setTimeout(r, 1));
        return { missing: [] };
      },
      { maxBatch: 4 },
    );
    await Promise.all(Array.from({ length: 11 }, (_, i) => batcher.write(`p${i}`)));
    expect(sizes).toEqual([1, 4, 4, 2]);
  });

  it('drains: resolves only once every write queued so far has committed', async () => {
    const ledger = gatedLedger(new Set(['a', 'b', 'c']));
    const batcher = new PodWriteBatcher(ledger.writeMany);
    await batcher.drain(); // nothing queued: at once
    const writes = ['a', 'b', 'c'].map((u) => batcher.write(u));
    let drained = false;
    const drain = batcher.drain().then(() => {
      drained = true;
    });
    await ledger.openNext();
    await new Promise((r) => setTimeout(r, 5));
    expect(drained).toBe(false); // b and c, queued behind a, are still out
    await ledger.openNext();
    await drain;
    expect(await Promise.all(writes)).toEqual(['written', 'written', 'written']);
  });
});
