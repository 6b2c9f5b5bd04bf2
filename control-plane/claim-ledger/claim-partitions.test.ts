import { describe, expect, it } from 'vitest';
import { migSliceCardUuid } from '../../contract/index.js';
import {
  cardUuid,
  gpuNode,
  h100DynamicMigCard,
  h100MigCard,
  migUuid,
} from '../../test/support/control-plane/builders.js';
import { readNodeInventory } from '../placement/cluster-snapshot.js';
import { sliceLedgerCardsOf } from '../placement/dynamic-mig-cards.js';
import { partitionRowsOf } from './claim-partitions.js';

// Card 0 in MIG mode with two 3g.40gb instances; card 1 kept for dynamic MIG, a 1g.10gb made at slice 6.
const node = readNodeInventory(
  gpuNode({
    name: 'node-1',
    cards: [
      h100MigCard(1, [
        ['3g.40gb', 0],
        ['3g.40gb', 4],
      ]),
      h100DynamicMigCard(2, [['1g.10gb', 6]]),
    ],
  }),
);
const dynamicCard = cardUuid('node-1', 1);

describe('the ledger rows a MIG partition of a claim holds', () => {
  it('holds a static instance whole on its own ledger card, charged the part of its card it spans', () => {
    expect(partitionRowsOf(node, 'gpu-0-mig-3g-40gb-4')).toEqual([
      { cardUuid: migUuid(1, 4), core: 50, memoryMiB: 40448 },
    ]);
  });

  it("holds a dynamic card's partition as every memory slice it covers, each its slice's core, made or not", () => {
    expect(partitionRowsOf(node, 'gpu-1-mig-3g-40gb-0')).toEqual(
      [13, 12, 13, 12].map((core, k) => ({ cardUuid: migSliceCardUuid(dynamicCard, k), core, memoryMiB: 10195 })),
    );
    // Each slice charged all the memory its ledger card registers: a second holder cannot fit.
    const registered = node.dynamicMig.flatMap(sliceLedgerCardsOf).map((c) => c.memoryMiB);
    expect(new Set(registered)).toEqual(new Set([10195]));
    // The instance already there is held on the same rows (one representation per card).
    expect(partitionRowsOf(node, 'gpu-1-mig-1g-10gb-6')).toEqual([
      { cardUuid: migSliceCardUuid(dynamicCard, 6), core: 13, memoryMiB: 10195 },
    ]);
    // A +me profile, which the extender does not cut, is held on its slice too.
    expect(partitionRowsOf(node, 'gpu-1-mig-1g-10gb-me-3')).toEqual([
      { cardUuid: migSliceCardUuid(dynamicCard, 3), core: 12, memoryMiB: 10195 },
    ]);
  });

  it('names a partition the inventory does not have', () => {
    expect(partitionRowsOf(node, 'gpu-0-mig-1g-10gb-2')).toBe(
      "MIG partition gpu-0-mig-1g-10gb-2 is not in node node-1's inventory (no instance or dynamic-MIG card of that profile and placement)",
    );
  });
});
