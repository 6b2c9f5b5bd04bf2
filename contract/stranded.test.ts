import { describe, expect, it } from 'vitest';
import { isPartlyUsed, NOTHING_LEFT, strandedOnCard } from './stranded.js';

const card = (coreUsed: number, memoryUsedMiB: number) => ({ memoryMiB: 16_384, coreUsed, memoryUsedMiB });

describe('strandedOnCard', () => {
  it('strands the free core of a card whose free memory is below the smallest memory ask', () => {
    expect(strandedOnCard(card(30, 16_000), { core: 10, memoryMiB: 1_024 })).toEqual({ core: 70, memoryMiB: 0 });
    expect(strandedOnCard(card(30, 15_360), { core: 10, memoryMiB: 1_024 })).toEqual({ core: 0, memoryMiB: 0 });
  });

  it('strands the free memory of a card whose free core is below the smallest core ask', () => {
    expect(strandedOnCard(card(95, 8_192), { core: 10, memoryMiB: 1_024 })).toEqual({ core: 0, memoryMiB: 8_192 });
    expect(strandedOnCard(card(90, 8_192), { core: 10, memoryMiB: 1_024 })).toEqual({ core: 0, memoryMiB: 0 });
  });

  it('with nothing left of one kind as the floor, strands only beside an exhausted kind', () => {
    expect(strandedOnCard(card(40, 16_384), NOTHING_LEFT)).toEqual({ core: 60, memoryMiB: 0 });
    expect(strandedOnCard(card(100, 4_096), NOTHING_LEFT)).toEqual({ core: 0, memoryMiB: 12_288 });
    expect(strandedOnCard(card(99, 16_383), NOTHING_LEFT)).toEqual({ core: 0, memoryMiB: 0 });
  });

  it('never reports less than nothing stranded on an overcommitted card', () => {
    expect(strandedOnCard(card(120, 17_000), NOTHING_LEFT)).toEqual({ core: 0, memoryMiB: 0 });
  });
});

describe('isPartlyUsed', () => {
  it('is a card holding something with room left', () => {
    expect(isPartlyUsed(card(0, 0))).toBe(false);
    expect(isPartlyUsed(card(0, 1))).toBe(true);
    expect(isPartlyUsed(card(100, 16_384))).toBe(false);
    expect(isPartlyUsed(card(100, 1))).toBe(true);
  });
});
