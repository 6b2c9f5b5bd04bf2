import { describe, expect, it } from 'vitest';
import { nodeInventorySchema, vcudaAnnotations } from '../contract/index.js';
import { FakeGpuSource } from '../test/support/node-agent/fake-gpu-source.js';
import { buildInventory, InventoryPublisher, migForInventory, type NodePatcher } from './inventory.js';
import type { CardMig } from './nvml/gpu-source.js';

const gpu = new FakeGpuSource({ cards: 4, memoryMiB: 81559, cardsPerNuma: 2, nvlinks: 4 });
const cards = gpu.listCards().map((c) => ({ ...c, healthy: true }));
const inv = (now: number, healthy = true) =>
  buildInventory({
    nodeName: 'n1',
    memoryUnitMiB: 1,
    cards: cards.map((c, i) => (i === 3 && !healthy ? { ...c, healthy: false, healthReason: 'Xid 79' } : c)),
    link: (a, b) => gpu.link(a, b),
    now: new Date(now),
  });

class RecordingPatcher implements NodePatcher {
  readonly patches: Record<string, string>[] = [];
  async patchNodeAnnotations(_node: string, a: Record<string, string>) {
    this.patches.push(a);
  }
}

const layout: CardMig = {
  mode: 'enabled',
  profiles: [
    {
      profileId: 9,
      profile: '3g.40gb',
      computeSlices: 3,
      memorySlices: 4,
      maxInstances: 2,
      sms: 60,
      memoryMiB: 40448,
      placements: [0, 4],
    },
  ],
  instances: [
    {
      uuid: 'MIG-6d696700-0000-4000-8000-000000000001',
      profile: '3g.40gb',
      profileId: 9,
      gpuInstanceId: 2,
      computeInstanceId: 0,
      placement: { start: 4, size: 4 },
      memoryMiB: 40448,
      sms: 60,
    },
  ],
};

describe('inventory: MIG', () => {
  it("publishes each card's MIG mode, instances and placements, and nothing for a card without MIG", () => {
    const i = buildInventory({
      nodeName: 'n1',
      memoryUnitMiB: 1,
      cards: cards.map((c, k) => (k === 0 ? { ...c, migMode: true, mig: layout } : c)),
      link: (a, b) => gpu.link(a, b),
      now: new Date(0),
    });
    expect(nodeInventorySchema.safeParse(i).success).toBe(true);
    expect(i.cards[0]?.mig).toEqual(layout);
    expect(i.cards[1]).not.toHaveProperty('mig');
  });

  it('keeps a card that started in MIG mode MIG-only when its layout cannot be read', () => {
    const errors: unknown[] = [];
    const failing = () => {
      throw new Error('nvml gone');
    };
    expect(migForInventory({ migMode: true }, failing, (e) => errors.push(e))).toEqual({
      mode: 'enabled',
      profiles: [],
      instances: [],
    });
    expect(errors).toHaveLength(1);
    // Switched off behind the agent's back: its whole-card devices were never offered, so neither is it.
    expect(
      migForInventory(
        { migMode: true },
        () => ({ mode: 'disabled', profiles: [], instances: [] }),
        () => {},
      ),
    ).toMatchObject({ mode: 'enabled' });
    expect(
      migForInventory(
        { migMode: false },
        () => layout,
        () => {},
      ),
    ).toEqual(layout);
    expect(
      migForInventory(
        {},
        () => null,
        () => {},
      ),
    ).toBeUndefined();
  });

  it('publishes a card kept for dynamic MIG as dynamic in either mode, with no profile when unreadable', () => {
    const off = { mode: 'disabled' as const, profiles: layout.profiles, instances: [] };
    expect(
      migForInventory(
        { migMode: false, migDynamic: true },
        () => off,
        () => {},
      ),
    ).toEqual({ ...off, dynamic: true });
    expect(
      migForInventory(
        { migMode: false, migDynamic: true },
        () => {
          throw new Error('nvml gone');
        },
        () => {},
      ),
    ).toEqual({ mode: 'enabled', profiles: [], instances: [], dynamic: true });
  });
});

describe('inventory', () => {
  it('matches the contract schema, with a square link matrix', () => {
    const i = inv(0);
    expect(nodeInventorySchema.safeParse(i).success).toBe(true);
    expect(i.cards.map((c) => [c.index, c.memoryMiB, c.numaNode])).toEqual([
      [0, 81559, 0],
      [1, 81559, 0],
      [2, 81559, 1],
      [3, 81559, 1],
    ]);
    expect(i.links[0]?.[0]).toEqual({ nvlinks: 0, pcie: 'internal' });
    expect(i.links[0]?.[1]).toEqual({ nvlinks: 4, pcie: 'node' });
    expect(i.links[1]?.[2]).toEqual({ nvlinks: 4, pcie: 'system' });
  });

  it('publishes per card whether it can burst (concurrent managed access), and nothing when unknown', () => {
    const i = buildInventory({
      nodeName: 'n1',
      memoryUnitMiB: 1,
      cards: cards.slice(0, 3).map((c, k) => (k === 2 ? c : { ...c, concurrentManagedAccess: k === 0 })),
      link: (a, b) => gpu.link(a, b),
      now: new Date(0),
    });
    expect(i.cards.map((c) => c.memoryBurst)).toEqual([true, false, undefined]);
    expect(i.cards[2]).not.toHaveProperty('memoryBurst');
    expect(nodeInventorySchema.safeParse(i).success).toBe(true);
    // Hostile input: only a boolean passes the contract.
    const forged = { ...i, cards: [{ ...i.cards[0], memoryBurst: 'yes' }], links: [[i.links[0]?.[0]]] };
    expect(nodeInventorySchema.safeParse(forged).error?.issues[0]?.path).toEqual(['cards', 0, 'memoryBurst']);
  });

  it('is patched when it changes or the heartbeat is due, not otherwise', async () => {
    const patcher = new RecordingPatcher();
    const pub = new InventoryPublisher(patcher, 30_000);
    expect(await pub.publish(inv(0), 0)).toBe(true);
    expect(await pub.publish(inv(10_000), 10_000)).toBe(false);
    expect(await pub.publish(inv(20_000, false), 20_000)).toBe(true);
    expect(await pub.publish(inv(40_000, false), 40_000)).toBe(false);
    expect(await pub.publish(inv(50_000, false), 50_000)).toBe(true);
    expect(patcher.patches).toHaveLength(3);
    const last = patcher.patches[2] as Record<string, string>;
    expect(last[vcudaAnnotations.heartbeat]).toBe(new Date(50_000).toISOString());
    const published = nodeInventorySchema.parse(JSON.parse(last[vcudaAnnotations.inventory] as string));
    expect(published.cards[3]).toMatchObject({ healthy: false, healthReason: 'Xid 79' });
  });
});
