import { describe, expect, it } from 'vitest';
import { coreGroupOfDevice } from '../allocation/core-devices.js';
import { encodedListAndWatchBytes } from '../kubelet/grpc-services.js';
import {
  type CardHealthView,
  listCoreDevices,
  listMemoryDevices,
  memoryListAndWatchBytes,
  planMemoryAdvertise,
} from './device-list.js';
import { preferCoreDevices } from './plugins.js';

const cards = (n: number, memoryMiB: number, healthy = true): CardHealthView[] =>
  Array.from({ length: n }, (_, i) => ({ index: i, memoryMiB, numaNode: i % 2, healthy }));

const KUBELET_BUDGET = 4 * 1024 * 1024 - 64 * 1024;

describe('device lists', () => {
  it('core: 100 devices per card, each tied to its card', () => {
    const list = listCoreDevices(cards(3, 1000));
    expect(list).toHaveLength(300);
    expect(new Set(list.map((d) => d.ID)).size).toBe(300);
    expect(list.map((d) => coreGroupOfDevice(d.ID))).toEqual(
      [...Array(300).keys()].map((i) => String(Math.floor(i / 100))),
    );
    expect(coreGroupOfDevice('m1z')).toBeUndefined();
  });

  it('core: a shared MIG instance is a core group of its own, named by parent and GPU instance', () => {
    const shared: CardHealthView = { index: 0, coreGroup: '0g2', memoryMiB: 40448, numaNode: 0, healthy: true };
    const list = listCoreDevices([{ ...(cards(1, 10)[0] as CardHealthView), migMode: true }, shared]);
    expect(list).toHaveLength(100);
    expect(list[0]?.ID).toBe('c0g2-00');
    expect(new Set(list.map((d) => coreGroupOfDevice(d.ID)))).toEqual(new Set(['0g2']));
    expect(listMemoryDevices([shared], 4096)).toHaveLength(9);
  });

  it('memory: one device per unit, unique IDs, health per card', () => {
    const list = listMemoryDevices([...cards(1, 10), { index: 1, memoryMiB: 10, numaNode: 0, healthy: false }], 4);
    expect(list.map((d) => d.health)).toEqual(['Healthy', 'Healthy', 'Unhealthy', 'Unhealthy']);
    expect(new Set(list.map((d) => d.ID)).size).toBe(4);
  });

  it('a card in MIG mode has no core and no memory device: never offered whole or as shares', () => {
    const list = [...cards(2, 10)];
    list[0] = { ...(list[0] as CardHealthView), migMode: true };
    expect(listCoreDevices(list).map((d) => coreGroupOfDevice(d.ID))).toEqual(Array(100).fill('1'));
    expect(listMemoryDevices(list, 5)).toHaveLength(2);
    expect(planMemoryAdvertise(list, { memoryUnitMiB: 5, mode: 'auto', budgetBytes: KUBELET_BUDGET }).units).toBe(2);
  });

  it.each([
    [1, 100, 1],
    [2, 5000, 1],
    [3, 81559, 1],
    [2, 81559, 256],
  ])('computed ListAndWatch size equals the encoder (%i cards of %i MiB, unit %i MiB)', (n, mib, unit) => {
    for (const healthy of [true, false]) {
      const c = cards(n, mib, healthy);
      expect(memoryListAndWatchBytes(c, unit)).toBe(encodedListAndWatchBytes({ devices: listMemoryDevices(c, unit) }));
    }
  });
});

describe('unit policy', () => {
  it('an 8 x 141 GiB node at 1 MiB does not fit a ListAndWatch message, so memory goes to node status', () => {
    const plan = planMemoryAdvertise(cards(8, 141 * 1024), {
      memoryUnitMiB: 1,
      mode: 'auto',
      budgetBytes: KUBELET_BUDGET,
    });
    expect(plan.via).toBe('node-status');
    expect(plan.units).toBe(8 * 141 * 1024);
    expect(plan.listAndWatchBytes).toBeGreaterThan(4 * 1024 * 1024);
  });

  it('a 2 x 80 GiB node at 1 MiB fits, and keeps per-unit devices', () => {
    const plan = planMemoryAdvertise(cards(2, 81559), { memoryUnitMiB: 1, mode: 'auto', budgetBytes: KUBELET_BUDGET });
    expect(plan).toMatchObject({ via: 'device-plugin', units: 163118 });
    expect(plan.listAndWatchBytes).toBeLessThanOrEqual(KUBELET_BUDGET);
  });

  it('the 8 x 141 GiB node fits at 8 MiB units', () => {
    const plan = planMemoryAdvertise(cards(8, 141 * 1024), {
      memoryUnitMiB: 8,
      mode: 'auto',
      budgetBytes: KUBELET_BUDGET,
    });
    expect(plan.via).toBe('device-plugin');
  });

  it('forcing device-plugin where it cannot fit is a startup error that says what to change', () => {
    expect(() =>
      planMemoryAdvertise(cards(8, 141 * 1024), {
        memoryUnitMiB: 1,
        mode: 'device-plugin',
        budgetBytes: KUBELET_BUDGET,
      }),
    ).toThrow(
      /^memoryAdvertise: device-plugin: .* over the 4128768-byte budget; raise memoryUnitMiB or use memoryAdvertise: auto$/,
    );
  });
});

describe('preferred allocation', () => {
  it('fills from one card rather than spreading', () => {
    const available = ['c0-00', 'c0-01', 'c1-00', 'c1-01', 'c1-02', 'c1-03'];
    expect(
      preferCoreDevices({ available_deviceIDs: available, must_include_deviceIDs: [], allocation_size: 3 }),
    ).toEqual(['c1-00', 'c1-01', 'c1-02']);
    expect(
      preferCoreDevices({ available_deviceIDs: available, must_include_deviceIDs: ['c0-01'], allocation_size: 2 }),
    ).toEqual(['c0-01', 'c1-00']);
  });

  it("takes the granted cards' devices first when the pending container is known", () => {
    const available = ['c0-00', 'c0-01', 'c1-00', 'c1-01', 'c1-02', 'c2-00'];
    const granted = new Map([
      ['0', 1],
      ['2', 1],
    ]);
    expect(
      preferCoreDevices({ available_deviceIDs: available, must_include_deviceIDs: [], allocation_size: 2 }, granted),
    ).toEqual(['c0-00', 'c2-00']);
  });
});
