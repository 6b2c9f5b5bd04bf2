import { describe, expect, it } from 'vitest';
import { linkScore, type NodeInventory, nodeInventorySchema } from './inventory.js';

const card = (i: number) => ({
  uuid: `GPU-0000000${i}-aaaa-bbbb-cccc-dddddddddddd`,
  index: i,
  model: 'NVIDIA H100 80GB HBM3',
  memoryMiB: 81559,
  numaNode: i < 4 ? 0 : 1,
  pciBusId: `00000000:${(0x18 + i).toString(16)}:00.0`,
  healthy: true,
});

const inventory: NodeInventory = {
  version: 1,
  node: 'gpu-node-a',
  memoryUnitMiB: 1,
  cards: [card(0), card(1)],
  links: [
    [
      { nvlinks: 0, pcie: 'internal' },
      { nvlinks: 18, pcie: 'system' },
    ],
    [
      { nvlinks: 18, pcie: 'system' },
      { nvlinks: 0, pcie: 'internal' },
    ],
  ],
  heartbeat: '2026-11-22T03:00:00.000Z',
};

describe('node inventory', () => {
  it('accepts a well-formed inventory', () => {
    expect(nodeInventorySchema.parse(inventory)).toEqual(inventory);
  });

  it('refuses a link matrix that is not square in card order', () => {
    const bad = { ...inventory, links: [inventory.links[0]] };
    const result = nodeInventorySchema.safeParse(bad);
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(['links']);
  });

  it('refuses duplicate UUIDs and malformed ones', () => {
    expect(nodeInventorySchema.safeParse({ ...inventory, cards: [card(0), card(0)] }).success).toBe(false);
    expect(
      nodeInventorySchema.safeParse({
        ...inventory,
        cards: [{ ...card(0), uuid: 'nope' }],
        links: [[inventory.links[0]![0]]],
      }).success,
    ).toBe(false);
  });

  it('ranks NVLink above every PCIe path, and nearer PCIe paths above farther ones', () => {
    const order = (['internal', 'single', 'multiple', 'hostbridge', 'node', 'system'] as const).map((pcie) =>
      linkScore({ nvlinks: 0, pcie }),
    );
    expect([...order].sort((a, b) => b - a)).toEqual(order);
    expect(linkScore({ nvlinks: 1, pcie: 'system' })).toBeGreaterThan(linkScore({ nvlinks: 0, pcie: 'internal' }));
    expect(linkScore({ nvlinks: 18, pcie: 'system' })).toBeGreaterThan(linkScore({ nvlinks: 4, pcie: 'system' }));
  });
});
