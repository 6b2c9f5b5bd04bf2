import { describe, expect, it } from 'vitest';
import { podDirsToRemove } from './housekeeping.js';

describe('housekeeping', () => {
  const now = 1_000_000;
  it.each([
    { name: 'a live pod is kept', dir: { podUid: 'a', modifiedAtMs: 0 }, live: ['a'], removed: [] },
    {
      name: 'a gone pod past the grace is removed',
      dir: { podUid: 'b', modifiedAtMs: now - 120_000 },
      live: [],
      removed: ['b'],
    },
    {
      name: 'a gone pod within the grace is kept',
      dir: { podUid: 'c', modifiedAtMs: now - 1_000 },
      live: [],
      removed: [],
    },
  ])('$name', ({ dir, live, removed }) => {
    expect(podDirsToRemove([dir], new Set(live), now, 120_000)).toEqual(removed);
  });
});
