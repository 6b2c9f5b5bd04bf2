import { describe, expect, it } from 'vitest';
import { computeBusyShares, MAX_CARRY_NS } from './busy-shares.js';

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

  it('forgets containers no longer read, and carries growth past the period into the next ones', () => {
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
    // b's 50 ms past the period are still owed: its baseline moved by the 100 ms credited.
    expect(r.baseline.get('b')).toBe(ms(100));
    const next = computeBusyShares(r.baseline, [{ key: 'b', busyNs: ms(150) }], 100);
    expect(next.shares.byContainer.get('b')).toBeCloseTo(5000, 6);
    expect(next.addedNs).toBe(50e6);
  });

  it('spreads a rare program’s lump over the periods that follow, so the shares add up to it', () => {
    // One timed 40 ms launch standing for 25 launches adds a second at once; 150 ms periods.
    let baseline = new Map([['a', 0n]]);
    let credited = 0;
    const shares: number[] = [];
    for (let tick = 0; tick < 10; tick++) {
      const r = computeBusyShares(baseline, [{ key: 'a', busyNs: ms(1000) }], 150);
      credited += r.addedNs;
      shares.push(r.shares.byContainer.get('a') ?? 0);
      baseline = r.baseline;
    }
    expect(credited).toBe(1000e6);
    expect(shares.slice(0, 6)).toEqual([10_000, 10_000, 10_000, 10_000, 10_000, 10_000]);
    expect(shares[6]).toBeCloseTo((100 / 150) * 10_000, 6);
    expect(shares.slice(7)).toEqual([0, 0, 0]);
  });

  it('bounds the carry, so a counter that over-reads builds no backlog past it', () => {
    const r = computeBusyShares(new Map([['a', 0n]]), [{ key: 'a', busyNs: ms(60_000) }], 100);
    expect(r.baseline.get('a')).toBe(ms(60_000) - MAX_CARRY_NS);
  });

  it('reads nothing from a period of no length', () => {
    const r = computeBusyShares(new Map([['a', 0n]]), [{ key: 'a', busyNs: ms(5) }], 0);
    expect(r.shares.byContainer.get('a')).toBe(0);
    expect(r.shares.cardBusyBp).toBe(0);
  });
});
