/**
 * The node's ResourceSlice (resource.k8s.io/v1), built from its cards (pure). One device per
 * physical card, shareable (`allowMultipleAllocations`) through two consumable capacities: `cores`
 * (hundredths of the card, 1..100 in steps of 1) and `memory` (the card's bytes as the node's
 * memory unit counts them, in steps of one unit). A request that names neither takes the whole
 * card (each capacity's default is all of it). A card whose health failed is tainted (NoSchedule,
 * so running claims stay) or left out, as configured; a card in MIG mode is left out.
 */
import {
  DRA_CAPACITY,
  DRA_CORES_PER_CARD,
  DRA_UNHEALTHY_TAINT,
  draDeviceName,
  formatDraQuantity,
  MIB,
} from '../../contract/index.js';
import type { GpuCard, GpuLink } from '../nvml/gpu-source.js';

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
  taints?: DeviceTaint[];
};
export type ResourceSliceSpec = {
  driver: string;
  pool: { name: string; generation: number; resourceSliceCount: number };
  nodeName: string;
  devices: SliceDevice[];
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
};

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

export function buildResourceSlice(input: SliceInput): ResourceSlice {
  const cards = [...input.cards].sort((a, b) => a.index - b.index);
  // A card in MIG mode cannot be shared by time and memory: it is not offered (as in device-plugin mode).
  const offered = cards.filter((c) => !c.migMode);
  const published = input.unhealthy === 'withdraw' ? offered.filter((c) => c.healthy) : offered;
  const devices = published.map((card): SliceDevice => {
    const peers = cards.filter((o) => o.index !== card.index && input.link(card.index, o.index).nvlinks > 0).length;
    const device: SliceDevice = {
      name: draDeviceName(card.index),
      attributes: attributesOf(card, peers),
      capacity: capacityOf(card, input.memoryUnitMiB),
      allowMultipleAllocations: true,
    };
    if (!card.healthy)
      device.taints = [{ key: DRA_UNHEALTHY_TAINT, value: taintValueOf(card.healthReason), effect: 'NoSchedule' }];
    return device;
  });
  const owner: OwnerReference[] = input.nodeUid
    ? [{ apiVersion: 'v1', kind: 'Node', name: input.nodeName, uid: input.nodeUid, controller: true }]
    : [];
  return {
    apiVersion: RESOURCE_API_VERSION,
    kind: 'ResourceSlice',
    metadata: { name: sliceName(input.nodeName, input.driver), ...(owner.length ? { ownerReferences: owner } : {}) },
    spec: {
      driver: input.driver,
      pool: { name: input.nodeName, generation: input.generation, resourceSliceCount: 1 },
      nodeName: input.nodeName,
      devices,
    },
  };
}

/** What "changed" means for the pool: the devices and where they are, not the generation. */
export function sliceContentKey(slice: ResourceSlice): string {
  const { pool: _pool, ...rest } = slice.spec;
  return JSON.stringify(rest);
}
