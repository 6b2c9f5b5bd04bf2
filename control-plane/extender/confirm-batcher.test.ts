import { describe, expect, it } from 'vitest';
import { ConfirmBatcher } from './confirm-batcher.js';

/** A confirmMany that commits when the test says, recording each statement's pods. */
function gatedLedger(held: Set<string>) {
  const statements: string[][] = [];
  const gates: (() => void)[] = [];
  const confirmMany = async (uids: readonly string[]) => {
    statements.push([...uids]);
    await new Promise<void>((open) => gates.push(open));
    return { missing: uids.filter((u) => !held.has(u)) };
  };
  const openNext = async () => {
    while (gates.length === 0) await new Promise((r) => setTimeout(r, 1));
    gates.shift()?.();
  };
  return { confirmMany, statements, openNext };
}

describe('ConfirmBatcher', () => {
  it('sends the first confirm at once and the ones arriving meanwhile as one statement', async () => {
    const ledger = gatedLedger(new Set(['a', 'b', 'c', 'd']));
    const batcher = new ConfirmBatcher(ledger.confirmMany);
    const first = batcher.confirm('a');
    const rest = ['b', 'c', 'd'].map((u) => batcher.confirm(u));
    expect(ledger.statements).toEqual([['a']]);
    await ledger.openNext();
    expect(await first).toBe('confirmed');
    await ledger.openNext();
    expect(await Promise.all(rest)).toEqual(['confirmed', 'confirmed', 'confirmed']);
    expect(ledger.statements).toEqual([['a'], ['b', 'c', 'd']]);
  });

  it('tells each caller whether its pod still held a reservation', async () => {
    const ledger = gatedLedger(new Set(['kept']));
    const batcher = new ConfirmBatcher(ledger.confirmMany);
    const outcomes = Promise.all([batcher.confirm('kept'), batcher.confirm('expired')]);
    await ledger.openNext();
    await ledger.openNext();
    expect(await outcomes).toEqual(['confirmed', 'missing']);
  });

  it('retries a failed statement, then fails only that batch and keeps serving', async () => {
    let calls = 0;
    const batcher = new ConfirmBatcher(
      async (uids) => {
        calls++;
        if (uids.includes('doomed')) throw new Error('connection reset');
        return { missing: [] };
      },
      { attempts: 3, backoffMs: 1 },
    );
    await expect(batcher.confirm('doomed')).rejects.toThrow('connection reset');
    expect(calls).toBe(3);
    expect(await batcher.confirm('next')).toBe('confirmed');
  });

  it('splits a long queue into statements of at most maxBatch pods', async () => {
    const sizes: number[] = [];
    const batcher = new ConfirmBatcher(
      async (uids) => {
        sizes.push(uids.length);
        await new Promise((r) => setTimeout(r, 1));
        return { missing: [] };
      },
      { maxBatch: 4 },
    );
    await Promise.all(Array.from({ length: 11 }, (_, i) => batcher.confirm(`p${i}`)));
    expect(sizes).toEqual([1, 4, 4, 2]);
  });
});
