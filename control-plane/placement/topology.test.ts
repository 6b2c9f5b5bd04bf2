import { describe, expect, it } from 'vitest';
import type { CardLink, PcieLevel } from '../../contract/index.js';
import { chooseCardSet, normalizeLinkScore } from './topology.js';

function matrix(n: number, link: (i: number, j: number) => CardLink): CardLink[][] {
  return Array.from({ length: n }, (_, i) =>
    Array.from({ length: n }, (__, j) => (i === j ? { nvlinks: 0, pcie: 'internal' } : link(i, j))),
  );
}
const pcie = (level: PcieLevel): CardLink => ({ nvlinks: 0, pcie: level });

describe('link ranking', () => {
  it('orders NVLink, then PCIe switch, host bridge, NUMA node, across sockets', () => {
    const order = [
      { nvlinks: 2, pcie: 'system' as const },
      pcie('single'),
      pcie('hostbridge'),
      pcie('node'),
      pcie('system'),
    ].map(normalizeLinkScore);
    expect([...order].sort((a, b) => b - a)).toEqual(order);
    expect(new Set(order).size).toBe(order.length);
  });
});

describe('chooseCardSet', () => {
  // Two sockets of four cards: 0-3 and 4-7; within a socket pairs (0,1),(2,3),(4,5),(6,7) share a PCIe switch.
  const socket = (i: number) => Math.floor(i / 4);
  const twoSockets = matrix(8, (i, j) =>
    socket(i) !== socket(j)
      ? pcie('system')
      : Math.floor(i / 2) === Math.floor(j / 2)
        ? pcie('single')
        : pcie('hostbridge'),
  );

  it.each([
    { name: 'a pair on one PCIe switch', candidates: [0, 2, 3, 4], k: 2, want: [2, 3] },
    { name: 'four cards within one socket', candidates: [0, 1, 2, 4, 5, 6, 7], k: 4, want: [4, 5, 6, 7] },
    { name: 'crosses sockets only when it must', candidates: [0, 4], k: 2, want: [0, 4] },
  ])('$name', ({ candidates, k, want }) => {
    expect(chooseCardSet(candidates, k, twoSockets)?.indexes).toEqual(want);
  });

  it('prefers an NVLinked pair over a PCIe switch pair', () => {
    const links = matrix(4, (i, j) =>
      i + j === 3 && i !== j && Math.abs(i - j) === 3 ? { nvlinks: 4, pcie: 'system' } : pcie('single'),
    );
    expect(chooseCardSet([0, 1, 2, 3], 2, links)?.indexes).toEqual([0, 3]);
  });

  it('returns nothing when there are too few candidates', () => {
    expect(chooseCardSet([0], 2, twoSockets)).toBeUndefined();
  });

  it('stays correct on large nodes where it searches greedily', () => {
    const links = matrix(32, (i, j) =>
      Math.floor(i / 8) === Math.floor(j / 8) ? { nvlinks: 1, pcie: 'system' } : pcie('system'),
    );
    const set = chooseCardSet(
      Array.from({ length: 32 }, (_, i) => i),
      8,
      links,
    );
    expect(set?.quality).toBe(1);
    expect(new Set(set?.indexes.map((i) => Math.floor(i / 8))).size).toBe(1);
  });
});
