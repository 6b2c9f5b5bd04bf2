import { describe, expect, it } from 'vitest';
import { createGroupCommit } from './group-commit.js';

function recorder(batchFails = false) {
  const batches: number[][] = [];
  const alone: number[] = [];
  const submit = createGroupCommit<number, string>({
    maxBatch: 3,
    runBatch: async (ops) => {
      batches.push([...ops]);
      await new Promise((r) => setTimeout(r, 5));
      if (batchFails) throw new Error('deadlock detected');
      return ops.map((op) => `batch:${op}`);
    },
    runOne: async (op) => {
      alone.push(op);
      await new Promise((r) => setTimeout(r, 5));
      if (op === 13) throw new Error('pod 13 is broken');
      return `alone:${op}`;
    },
  });
  return { batches, alone, submit };
}

describe('group commit', () => {
  it('sends a lone operation by itself, and what queues meanwhile in batches of at most maxBatch', async () => {
    const { batches, alone, submit } = recorder();
    const results = await Promise.all([1, 2, 3, 4, 5, 6].map(submit));
    expect(alone).toEqual([1]);
    expect(batches).toEqual([
      [2, 3, 4],
      [5, 6],
    ]);
    expect(results).toEqual(['alone:1', 'batch:2', 'batch:3', 'batch:4', 'batch:5', 'batch:6']);
  });

  it('runs each operation of a failed batch alone, so one failure is only its own', async () => {
    const { alone, submit } = recorder(true);
    const results = await Promise.allSettled([11, 12, 13, 14].map(submit));
    expect(alone).toEqual([11, 12, 13, 14]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason)))).toEqual([
      'alone:11',
      'alone:12',
      'Error: pod 13 is broken',
      'alone:14',
    ]);
  });
});
