/**
 * The node's ResourceSlice (resource.k8s.io/v1), built from its cards (pure). One device per
 * physical card, shareable (`allowMultipleAllocations`) through two consumable capacities: `cores`
 * (hundredths of the card, 1..100 in steps of 1) and `memory` (the card's bytes as the node's
 * memory unit counts them, in steps of one unit). A request that names neither takes the whole
 * card (each capacity's default is all of it). A card whose health failed is tainted (NoSchedule,
 * so running claims stay) or left out, as configured.
 *
 * A card in MIG mode is not offered whole or in shares: its MIG partitions are (mig-partitions.ts),
 * exclusive devices that consume a counter set of the card. kube-apiserver 1.36 takes counter sets
 * only in a slice without devices, at most 8 sets of at most 32 counters per slice, and at most 64
 * devices per slice where any consumes counters (128 otherwise), each consuming from at most 2
 * sets (each limit checked against the real server). So the pool is then several slices: the
 * cards' (named as before), `…-counters-<k>` and `…-mig-<k>`, all of one generation.
 */
import {
  DRA_CAPACITY,
  DRA_CORES_PER_CARD,
  DRA_UNHEALTHY_TAINT,
  draDeviceName,
  formatDraQuantity,
  MIB,
} from '../../contract/index.js';
import type { CardMig, GpuCard, GpuLink } from '../nvml/gpu-source.js';
import {
  type CounterConsumption,
  type CounterSet,
  type MigPartition,
  migAttributes,
  migConsumption,
  migCounterSet,
  migPartitionsOf,
} from './mig-partitions.js';

export const RESOURCE_API_VERSION = 'resource.k8s.io/v1';
/** The standard attribute the scheduler's `matchAttribute` uses to keep devices on one PCIe root. */
export const PCIE_ROOT_ATTRIBUTE = 'resource.kubernetes.io/pcieRoot';

export type DeviceAttribute = { string?: string; int?: number; bool?: boolean; version?: string };
export type DeviceCapacity = {
  value: string;
  requestPolicy?: { default?: string; validRange?: { min: string; max?: string; step?: string } };
};
export type DeviceTaint = { key: string; value?: string; effect: 'NoSchedule' | 'NoExecute' };
export type SliceDevice = {
  name: string;
  attributes: Record<string, DeviceAttribute>;
  capacity: Record<string, DeviceCapacity>;
  allowMultipleAllocations: boolean;
  consumesCounters?: CounterConsumption[];
  taints?: DeviceTaint[];
};
export type ResourceSliceSpec = {
  driver: string;
  pool: { name: string; generation: number; resourceSliceCount: number };
  nodeName: string;
  /** Absent from a slice of counter sets: the API takes one of `devices` and `sharedCounters`. */
  devices?: SliceDevice[];
  sharedCounters?: CounterSet[];
};
export type ResourceSlice = {
  apiVersion: typeof RESOURCE_API_VERSION;
  kind: 'ResourceSlice';
  metadata: { name: string; resourceVersion?: string; ownerReferences?: OwnerReference[] };
  spec: ResourceSliceSpec;
};
type OwnerReference = { apiVersion: 'v1'; kind: 'Node'; name: string; uid: string; controller: boolean };

/** A card with its health and where it sits (absent attributes are left out). */
export type SliceCard = GpuCard & {
  healthy: boolean;
  healthReason?: string;
  pcieRoot?: string;
  /** Kept for dynamic MIG (`mig.dynamicCards`): offered as partitions only, in or out of MIG mode. */
  migDynamic?: boolean;
  /** The card's MIG layout when it is in MIG mode or kept (absent, or unreadable: it offers nothing). */
  mig?: CardMig | null;
};

/** kube-apiserver 1.36's limits on one slice (see the header). */
export const MAX_COUNTER_SETS_PER_SLICE = 8;
export const MAX_DEVICES_PER_SLICE_WITH_COUNTERS = 64;

export type SliceInput = {
  driver: string;
  nodeName: string;
  /** The Node's uid: the slice is owned by its Node, so it goes when the Node goes. */
  nodeUid?: string;
  memoryUnitMiB: number;
  cards: readonly SliceCard[];
  link: (a: number, b: number) => GpuLink;
  unhealthy: 'taint' | 'withdraw';
  generation: number;
  /** Whether instances can be created at Prepare; a kept card's free placements are offered only then. */
  migCreatable?: boolean;
};

/** `570.86.15`, `9.0` → semver (`570.86.15`, `9.0.0`); leading zeros dropped; undefined when not numeric. */
export function semverOf(text: string | undefined): string | undefined {
  const parts = (text ?? '').trim().split('.');
  if (parts.length === 0 || parts.length > 3 || parts.some((p) => !/^\d{1,9}$/.test(p))) return undefined;
  while (parts.length < 3) parts.push('0');
  return parts.map((p) => String(Number(p))).join('.');
}

/** A taint value must be a label value: the health reason with anything else turned into `-`. */
function taintValueOf(reason: string | undefined): string {
  const v = (reason ?? 'unhealthy').replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return v.slice(0, 63) || 'unhealthy';
}

function attributesOf(card: SliceCard, nvlinkPeers: number): Record<string, DeviceAttribute> {
  const attrs: Record<string, DeviceAttribute> = {
    uuid: { string: card.uuid },
    index: { int: card.index },
    productName: { string: card.model },
    memoryMiB: { int: Math.floor(card.memoryTotalBytes / MIB) },
    pciBusID: { string: card.pciBusId.toLowerCase() },
    nvlinkPeers: { int: nvlinkPeers },
  };
  if (card.numaNode !== null) attrs['numaNode'] = { int: card.numaNode };
  if (card.pcieRoot) attrs[PCIE_ROOT_ATTRIBUTE] = { string: card.pcieRoot };
  if (card.architecture) attrs['architecture'] = { string: card.architecture };
  const cc = semverOf(card.computeCapability);
  if (cc) attrs['cudaComputeCapability'] = { version: cc };
  const driver = semverOf(card.driverVersion);
  if (driver) attrs['driverVersion'] = { version: driver };
  return attrs;
}

/** The card's memory as whole units of the node's memory unit, in bytes (what `vcuda-memory` offers too). */
export function sliceMemoryBytes(memoryTotalBytes: number, memoryUnitMiB: number): number {
  return Math.floor(memoryTotalBytes / (memoryUnitMiB * MIB)) * memoryUnitMiB * MIB;
}

/** Bytes as a binary quantity (`16Gi`, `256Mi`): the scheduler writes consumedCapacity in the step's format. */
function bytesQuantity(bytes: number): string {
  return formatDraQuantity({ milli: BigInt(bytes) * 1000n, format: 'BinarySI' });
}

function capacityOf(card: SliceCard, memoryUnitMiB: number): Record<string, DeviceCapacity> {
  const memory = bytesQuantity(sliceMemoryBytes(card.memoryTotalBytes, memoryUnitMiB));
  const unit = bytesQuantity(memoryUnitMiB * MIB);
  const cores = String(DRA_CORES_PER_CARD);
  return {
    [DRA_CAPACITY.cores]: {
      value: cores,
      requestPolicy: { default: cores, validRange: { min: '1', max: cores, step: '1' } },
    },
    [DRA_CAPACITY.memory]: {
      value: memory,
      requestPolicy: { default: memory, validRange: { min: unit, max: memory, step: unit } },
    },
  };
}

export function sliceName(nodeName: string, driver: string): string {
  return `${nodeName}-${driver}`.slice(0, 253);
}

function taintsOf(card: SliceCard): DeviceTaint[] | undefined {
  return card.healthy
    ? undefined
    : [{ key: DRA_UNHEALTHY_TAINT, value: taintValueOf(card.healthReason), effect: 'NoSchedule' }];
}

function cardDevice(card: SliceCard, cards: readonly SliceCard[], input: SliceInput): SliceDevice {
  const peers = cards.filter((o) => o.index !== card.index && input.link(card.index, o.index).nvlinks > 0).length;
  const device: SliceDevice = {
    name: draDeviceName(card.index),
    attributes: attributesOf(card, peers),
    capacity: capacityOf(card, input.memoryUnitMiB),
    allowMultipleAllocations: true,
  };
  const taints = taintsOf(card);
  if (taints) device.taints = taints;
  return device;
}

function partitionDevice(part: MigPartition, card: SliceCard): SliceDevice {
  const device: SliceDevice = {
    name: part.device,
    attributes: migAttributes(part, card),
    capacity: { [DRA_CAPACITY.memory]: { value: bytesQuantity(part.profile.memoryMiB * MIB) } },
    allowMultipleAllocations: false,
    consumesCounters: [migConsumption(part)],
  };
  if (card.pcieRoot) device.attributes[PCIE_ROOT_ATTRIBUTE] = { string: card.pcieRoot };
  const taints = taintsOf(card);
  if (taints) device.taints = taints;
  return device;
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** The partitions this node offers (a withdrawn card's none), each with its card. */
export function offeredPartitions(
  input: Pick<SliceInput, 'cards' | 'unhealthy' | 'migCreatable'>,
): { part: MigPartition; card: SliceCard }[] {
  return [...input.cards]
    .sort((a, b) => a.index - b.index)
    .filter((c) => (c.migMode || c.migDynamic) && c.mig && (input.unhealthy === 'taint' || c.healthy))
    .flatMap((card) => {
      const creatable = input.migCreatable === true && card.migDynamic === true;
      return migPartitionsOf(card.index, card.mig as CardMig, creatable).map((part) => ({ part, card }));
    });
}

/** The node's pool: its cards' slice, then its MIG cards' counter sets and partitions when it has any. */
export function buildResourceSlices(input: SliceInput): ResourceSlice[] {
  const cards = [...input.cards].sort((a, b) => a.index - b.index);
  // A card in MIG mode, or kept for it, cannot be shared by time and memory: it is offered as its partitions only.
  const whole = cards.filter((c) => !c.migMode && !c.migDynamic && (input.unhealthy === 'taint' || c.healthy));
  const partitions = offeredPartitions(input);
  const counterSets = cards
    .filter((c) => partitions.some((p) => p.card.index === c.index))
    .map((c) => migCounterSet(c.index, c.mig as CardMig));
  const main = sliceName(input.nodeName, input.driver);
  const specs: { name: string; content: Pick<ResourceSliceSpec, 'devices' | 'sharedCounters'> }[] = [
    { name: main, content: { devices: whole.map((c) => cardDevice(c, cards, input)) } },
    ...chunks(counterSets, MAX_COUNTER_SETS_PER_SLICE).map((sets, k) => ({
      name: `${main}-counters-${k}`,
      content: { sharedCounters: sets },
    })),
    ...chunks(partitions, MAX_DEVICES_PER_SLICE_WITH_COUNTERS).map((group, k) => ({
      name: `${main}-mig-${k}`,
      content: { devices: group.map(({ part, card }) => partitionDevice(part, card)) },
    })),
  ];
  const owner: OwnerReference[] = input.nodeUid
    ? [{ apiVersion: 'v1', kind: 'Node', name: input.nodeName, uid: input.nodeUid, controller: true }]
    : [];
  return specs.map(({ name, content }) => ({
    apiVersion: RESOURCE_API_VERSION,
    kind: 'ResourceSlice',
    metadata: { name, ...(owner.length ? { ownerReferences: owner } : {}) },
    spec: {
      driver: input.driver,
      pool: { name: input.nodeName, generation: input.generation, resourceSliceCount: specs.length },
      nodeName: input.nodeName,
      ...content,
    },
  }));
}

/** What "changed" means for the pool: the devices and where they are, not the generation. */
export function sliceContentKey(slices: readonly ResourceSlice[]): string {
  return JSON.stringify(
    slices.map((s) => {
      const { pool: _pool, ...rest } = s.spec;
      return [s.metadata.name, rest];
    }),
  );
}
