/**
 * The devices each plugin advertises, built from the cards and their health (pure).
 * `vcuda-core`: 100 devices per card, `c<card>-<nn>`, with the card's NUMA node.
 * `vcuda-memory`: one device per memory unit, `m<base36>`, no topology: every byte counts when a
 * node has a million units (README: unit policy).
 * A card in MIG mode has neither: it is never offered whole or as shares of the full card; its
 * instances are, one plugin per profile, each instance one device named by its `MIG-` UUID.
 */
import { ValidationError } from '../../contract/index.js';
import { CORE_DEVICES_PER_CARD, coreDeviceId } from '../allocation/core-devices.js';
import { type Device, HEALTHY, UNHEALTHY } from '../kubelet/protocol.js';

export type CardHealthView = {
  index: number;
  memoryMiB: number;
  numaNode: number | null;
  healthy: boolean;
  /** In MIG mode: served only as its MIG instances, so no core or memory device of the whole card. */
  migMode?: boolean;
  /** A shared MIG instance's core group (`<parent>g<gpuInstanceId>`); absent for a card (its index). */
  coreGroup?: string;
};

export function listCoreDevices(cards: readonly CardHealthView[]): Device[] {
  const out: Device[] = [];
  for (const card of cards) {
    if (card.migMode) continue;
    const health = card.healthy ? HEALTHY : UNHEALTHY;
    const topology = card.numaNode === null ? null : { nodes: [{ ID: card.numaNode }] };
    for (let slot = 0; slot < CORE_DEVICES_PER_CARD; slot++) {
      out.push({ ID: coreDeviceId(card.coreGroup ?? card.index, slot), health, topology });
    }
  }
  return out;
}

/** A whole MIG instance as its profile's plugin advertises it: its `MIG-` UUID, its parent's health and NUMA node. */
export type MigDeviceView = { uuid: string; profile: string; healthy: boolean; numaNode: number | null };

/** The devices of one MIG profile's plugin: its instances on this node. */
export function listMigDevices(instances: readonly MigDeviceView[], profile: string): Device[] {
  return instances
    .filter((i) => i.profile === profile)
    .map((i) => ({
      ID: i.uuid,
      health: i.healthy ? HEALTHY : UNHEALTHY,
      topology: i.numaNode === null ? null : { nodes: [{ ID: i.numaNode }] },
    }));
}

export function unitsOfCard(card: CardHealthView, memoryUnitMiB: number): number {
  return card.migMode ? 0 : Math.floor(card.memoryMiB / memoryUnitMiB);
}

export function memoryDeviceId(unit: number): string {
  return `m${unit.toString(36)}`;
}

export function listMemoryDevices(cards: readonly CardHealthView[], memoryUnitMiB: number): Device[] {
  const out: Device[] = [];
  let unit = 0;
  for (const card of cards) {
    const health = card.healthy ? HEALTHY : UNHEALTHY;
    const n = unitsOfCard(card, memoryUnitMiB);
    for (let i = 0; i < n; i++) out.push({ ID: memoryDeviceId(unit++), health });
  }
  return out;
}

function varintBytes(n: number): number {
  let bytes = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    bytes++;
  }
  return bytes;
}

/**
 * Wire size of the memory plugin's ListAndWatch message, computed without building it:
 * per device `0a len { 0a len ID 12 len health }`. Pinned against the real encoder in tests.
 */
export function memoryListAndWatchBytes(cards: readonly CardHealthView[], memoryUnitMiB: number): number {
  let total = 0;
  let unit = 0;
  for (const card of cards) {
    const health = card.healthy ? HEALTHY.length : UNHEALTHY.length;
    const n = unitsOfCard(card, memoryUnitMiB);
    for (let i = 0; i < n; i++, unit++) {
      const idLength = memoryDeviceId(unit).length;
      const inner = 2 + idLength + 2 + health;
      total += 1 + varintBytes(inner) + inner;
    }
  }
  return total;
}

export type MemoryAdvertisePlan = {
  via: 'device-plugin' | 'node-status';
  units: number;
  listAndWatchBytes: number;
  reason: string;
};

/** The unit policy: devices while the full list fits the kubelet's receive limit, node status beyond. */
export function planMemoryAdvertise(
  cards: readonly CardHealthView[],
  opts: { memoryUnitMiB: number; mode: 'auto' | 'device-plugin' | 'node-status'; budgetBytes: number },
): MemoryAdvertisePlan {
  const units = cards.reduce((sum, c) => sum + unitsOfCard(c, opts.memoryUnitMiB), 0);
  // Every device is at worst "Unhealthy"; plan for that so a sick card never pushes us over.
  const worst = memoryListAndWatchBytes(
    cards.map((c) => ({ ...c, healthy: false })),
    opts.memoryUnitMiB,
  );
  const fits = worst <= opts.budgetBytes;
  if (opts.mode === 'node-status') {
    return { via: 'node-status', units, listAndWatchBytes: worst, reason: 'configured memoryAdvertise: node-status' };
  }
  if (opts.mode === 'device-plugin' && !fits) {
    throw ValidationError.forField(
      'memoryAdvertise',
      'fits-list-and-watch',
      `device-plugin: vcuda-memory's ${units} devices of ${opts.memoryUnitMiB} MiB make a ${worst}-byte ` +
        `ListAndWatch message, over the ${opts.budgetBytes}-byte budget; raise memoryUnitMiB or use memoryAdvertise: auto`,
    );
  }
  if (fits) {
    return {
      via: 'device-plugin',
      units,
      listAndWatchBytes: worst,
      reason: `${units} devices, ${worst} bytes <= ${opts.budgetBytes}`,
    };
  }
  return {
    via: 'node-status',
    units,
    listAndWatchBytes: worst,
    reason: `${units} devices would need ${worst} bytes > ${opts.budgetBytes}; advertised as node-level capacity`,
  };
}
