import { describe, expect, it } from 'vitest';
import { allocationDirsToRemove } from './housekeeping.js';

describe('housekeeping', () => {
  const now = 1_000_000;
  it.each([
    { name: 'a live allocation is kept, however old', dir: { key: 'a', modifiedAtMs: 0 }, live: ['a'], removed: [] },
    {
      name: 'an allocation no container holds is removed past the grace',
      dir: { key: 'b', modifiedAtMs: now - 120_000 },
      live: [],
      removed: ['b'],
    },
    {
      name: 'an allocation within the grace is kept (its PreStart may not have come yet)',
      dir: { key: 'c', modifiedAtMs: now - 1_000 },
      live: [],
      removed: [],
    },
  ])('$name', ({ dir, live, removed }) => {
    expect(allocationDirsToRemove([dir], new Set(live), now, 120_000)).toEqual(removed);
  });
});
