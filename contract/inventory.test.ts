import { describe, expect, it } from 'vitest';
import { linkScore, type NodeInventory, nodeInventorySchema, servedAsMigOnly } from './inventory.js';

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

  it("carries a card's MIG layout, bounded and checked", () => {
    const instance = {
      uuid: 'MIG-6d696700-0000-4000-8000-000000000001',
      profile: '1g.20gb',
      profileId: 15,
      gpuInstanceId: 6,
      computeInstanceId: 0,
      placement: { start: 6, size: 2 },
      memoryMiB: 20096,
      sms: 26,
    };
    const profile = {
      profileId: 15,
      profile: '1g.20gb',
      computeSlices: 1,
      memorySlices: 2,
      maxInstances: 4,
      sms: 26,
      memoryMiB: 20096,
      placements: [0, 2, 4, 6],
    };
    const withMig = (mig: unknown) => ({ ...inventory, cards: [{ ...card(0), mig }, card(1)] });
    const good = {
      mode: 'enabled',
      profiles: [profile, { ...profile, profileId: 20, profile: '1g.10gb+me' }],
      instances: [instance],
    };
    const parsed = nodeInventorySchema.parse(withMig(good));
    expect(parsed.cards[0]?.mig).toEqual(good);
    expect(servedAsMigOnly(parsed.cards[0] ?? {})).toBe(true);
    expect(servedAsMigOnly({ mig: undefined })).toBe(false);
    expect(servedAsMigOnly({ mig: { ...good, mode: 'disabled' } as never })).toBe(false);
    for (const bad of [
      { ...good, instances: [{ ...instance, placement: { start: 7, size: 2 } }] },
      { ...good, instances: [{ ...instance, uuid: 'GPU-6d696700-0000-4000-8000-000000000001' }] },
      { ...good, profiles: [{ ...profile, profile: 'mig-1g.20gb' }] },
      { ...good, profiles: [{ ...profile, placements: [8] }] },
      { ...good, mode: 'on' },
      { ...good, instances: Array(17).fill(instance) },
    ])
      expect(nodeInventorySchema.safeParse(withMig(bad)).success).toBe(false);
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
