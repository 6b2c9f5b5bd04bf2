import { describe, expect, it } from 'vitest';
import { computeBusyShares } from './busy-shares.js';

const ms = (n: number) => BigInt(Math.round(n * 1e6));

describe('computeBusyShares', () => {
  it('turns each counter’s growth over the period into the container’s share, and sums them for the card', () => {
    const baseline = new Map([
      ['a', ms(1000)],
      ['b', ms(50)],
    ]);
    const r = computeBusyShares(
      baseline,
      [
        { key: 'a', busyNs: ms(1000 + 30) },
        { key: 'b', busyNs: ms(50 + 70) },
      ],
      100,
    );
    expect(r.shares.byContainer.get('a')).toBeCloseTo(3000, 6);
    expect(r.shares.byContainer.get('b')).toBeCloseTo(7000, 6);
    expect(r.shares.cardBusyBp).toBeCloseTo(10_000, 6);
    expect(r.shares.intervals).toBe(1);
    expect(r.addedNs).toBe(100e6);
    expect(r.baseline).toEqual(
      new Map([
        ['a', ms(1030)],
        ['b', ms(120)],
      ]),
    );
  });

  it('only sets the baseline of a counter seen for the first time or gone backwards (a new region)', () => {
    const r = computeBusyShares(
      new Map([['old', ms(500)]]),
      [
        { key: 'new', busyNs: ms(400) },
        { key: 'old', busyNs: ms(10) },
      ],
      100,
    );
    expect(r.shares.byContainer.get('new')).toBe(0);
    expect(r.shares.byContainer.get('old')).toBe(0);
    expect(r.addedNs).toBe(0);
    expect(r.shares.intervals).toBe(0);
    expect(r.baseline.get('old')).toBe(ms(10));
  });

  it('forgets containers no longer read and clamps shares to the card', () => {
    const r = computeBusyShares(
      new Map([
        ['gone', 0n],
        ['a', 0n],
        ['b', 0n],
      ]),
      [
        { key: 'a', busyNs: ms(80) },
        { key: 'b', busyNs: ms(150) },
      ],
      100,
    );
    expect([...r.baseline.keys()]).toEqual(['a', 'b']);
    expect(r.shares.byContainer.get('b')).toBe(10_000);
    expect(r.shares.cardBusyBp).toBe(10_000);
  });

  it('reads nothing from a period of no length', () => {
    const r = computeBusyShares(new Map([['a', 0n]]), [{ key: 'a', busyNs: ms(5) }], 0);
    expect(r.shares.byContainer.get('a')).toBe(0);
    expect(r.shares.cardBusyBp).toBe(0);
  });
});
