/**
 * The plugins' decisions: `vcuda-core` (100 devices per card, does the allocation work and
 * requires PreStartContainer), `vcuda-memory` (one device per memory unit; counted by the
 * kubelet, nothing to hand the container: the limit comes from the signed assignment), and one
 * per MIG profile present (`mig-<profile>`, its instances).
 */
import { migResourceName, type ResourceNames } from '../../contract/index.js';
import type { Allocator } from '../allocation/allocator.js';
import { coreGroupOfDevice } from '../allocation/core-devices.js';
import type { ContainerAllocateResponse, ContainerPreferredAllocationRequest } from '../kubelet/protocol.js';
import {
  type CardHealthView,
  listCoreDevices,
  listMemoryDevices,
  listMigDevices,
  type MigDeviceView,
} from './device-list.js';
import type { PluginHandler } from './plugin-server.js';

/** What the plugins need of the cards' health (the agent's `CardHealth`): each card now, and word of a change. */
export interface CardHealthFeed {
  views(): CardHealthView[];
  subscribe(listener: () => void): () => void;
}

const EMPTY_RESPONSE: ContainerAllocateResponse = {
  envs: {},
  mounts: [],
  devices: [],
  annotations: {},
  cdi_devices: [],
};

/**
 * Prefers the devices already required, then devices of the cards the pending container was
 * granted (`perCard`: core group → core), then fills from the card with the most free slots.
 * Only cosmetic for safety (the grant decides the cards), but it makes PodResources and
 * `kubectl describe node` show the cards a container really uses.
 */
export function preferCoreDevices(
  request: ContainerPreferredAllocationRequest,
  perCard: ReadonlyMap<string, number> = new Map(),
): string[] {
  const chosen = [...request.must_include_deviceIDs];
  const picked = new Set(chosen);
  for (const [card, count] of perCard) {
    const ids = request.available_deviceIDs.filter((id) => coreGroupOfDevice(id) === card && !picked.has(id)).sort();
    for (const id of ids.slice(0, count)) {
      if (chosen.length >= request.allocation_size) break;
      chosen.push(id);
      picked.add(id);
    }
  }
  const taken = new Set(chosen);
  const byCard = new Map<string, string[]>();
  for (const id of request.available_deviceIDs) {
    if (taken.has(id)) continue;
    const card = coreGroupOfDevice(id) ?? '';
    const list = byCard.get(card) ?? [];
    list.push(id);
    byCard.set(card, list);
  }
  const cards = [...byCard.entries()].sort(
    (a, b) => b[1].length - a[1].length || a[0].localeCompare(b[0], 'en', { numeric: true }),
  );
  for (const [, ids] of cards) {
    for (const id of ids.sort()) {
      if (chosen.length >= request.allocation_size) return chosen;
      chosen.push(id);
    }
  }
  return chosen.slice(0, request.allocation_size);
}

export function corePlugin(names: ResourceNames, health: CardHealthFeed, allocator: Allocator): PluginHandler {
  return {
    resourceName: names.core,
    options: { pre_start_required: true, get_preferred_allocation_available: true },
    devices: () => listCoreDevices(health.views()),
    watchDevices: (listener) => health.subscribe(listener),
    preferredAllocation: (r) => preferCoreDevices(r, allocator.grantedCoresPerCard(r.allocation_size)),
    allocate: (ids) => allocator.allocate(ids),
    preStart: (ids) => allocator.preStart(ids),
  };
}

/** What the MIG plugins need of the node's instances (the agent's MigDevices, with parent health). */
export interface MigDeviceFeed {
  views(): MigDeviceView[];
  subscribe(listener: () => void): () => void;
}

/** Required devices first, then the instances the waiting container was granted, then the rest in order. */
export function preferMigDevices(request: ContainerPreferredAllocationRequest, granted: readonly string[]): string[] {
  const available = new Set(request.available_deviceIDs);
  const order = [
    ...request.must_include_deviceIDs,
    ...granted.filter((id) => available.has(id)),
    ...[...request.available_deviceIDs].sort(),
  ];
  return [...new Set(order)].slice(0, request.allocation_size);
}

/**
 * Whole MIG instances of one profile (`<domain>/mig-3g.40gb`): each instance a device, healthy while
 * its parent card is. Allocate and PreStartContainer tie the container as vcuda-core's do; the
 * signed grant decides which instances it gets.
 */
export function migPlugin(
  names: ResourceNames,
  profile: string,
  mig: MigDeviceFeed,
  allocator: Allocator,
): PluginHandler {
  return {
    resourceName: migResourceName(names, profile),
    options: { pre_start_required: true, get_preferred_allocation_available: true },
    devices: () => listMigDevices(mig.views(), profile),
    watchDevices: (listener) => mig.subscribe(listener),
    preferredAllocation: (r) => preferMigDevices(r, allocator.grantedMigDevices(profile, r.allocation_size)),
    allocate: (ids) => allocator.allocateMig(profile, ids),
    preStart: (ids) => allocator.preStartMig(profile, ids),
  };
}

export function memoryPlugin(names: ResourceNames, health: CardHealthFeed, memoryUnitMiB: number): PluginHandler {
  return {
    resourceName: names.memory,
    options: { pre_start_required: false, get_preferred_allocation_available: false },
    devices: () => listMemoryDevices(health.views(), memoryUnitMiB),
    watchDevices: (listener) => health.subscribe(listener),
    preferredAllocation: (r) => [...r.must_include_deviceIDs, ...r.available_deviceIDs].slice(0, r.allocation_size),
    allocate: async () => EMPTY_RESPONSE,
    preStart: async () => {},
  };
}
