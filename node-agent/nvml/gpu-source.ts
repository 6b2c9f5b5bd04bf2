/**
 * What the node agent needs from the GPUs, and nothing more. The NVML binding (koffi) and the
 * in-memory fake both implement it, so everything above can be tested without a driver.
 */
import type { PcieLevel } from '../../contract/index.js';

export type GpuCard = {
  /** NVML index on this node. */
  index: number;
  uuid: string;
  model: string;
  memoryTotalBytes: number;
  /** `00000000:3B:00.0` form. */
  pciBusId: string;
  /** `/dev/nvidia<minor>`. */
  minorNumber: number;
  /** NUMA node of the card's PCI device; null when the platform does not say. */
  numaNode: number | null;
  /**
   * Whether the card offers concurrent managed access (the CUDA attribute), without which libvcuda
   * serves no memory burst there; absent when the CUDA driver could not be asked.
   */
  concurrentManagedAccess?: boolean;
  /** MIG mode when the agent started: true in it, false out of it; absent when the card has no MIG. */
  migMode?: boolean;
  /** What the driver says of the card where it can (absent otherwise): `Hopper`, `9.0`, `570.86.15`. */
  architecture?: string;
  computeCapability?: string;
  driverVersion?: string;
};

/** A GPU-instance profile a card in MIG mode offers (`nvidia-smi mig -lgip`, `-lgipp`). */
export type MigProfile = {
  profileId: number;
  /** As NVIDIA names it: `1g.10gb`, `1g.10gb+me`, `7g.80gb`. */
  profile: string;
  computeSlices: number;
  memorySlices: number;
  maxInstances: number;
  sms: number;
  memoryMiB: number;
  /** Legal first memory slices (of 8), taken or not. */
  placements: number[];
};

/** A MIG device that exists: a compute instance in its GPU instance. */
export type MigInstance = {
  uuid: string;
  profile: string;
  profileId: number;
  gpuInstanceId: number;
  computeInstanceId: number;
  placement: { start: number; size: number };
  memoryMiB: number;
  sms: number;
};

export type CardMig = { mode: 'enabled' | 'disabled'; profiles: MigProfile[]; instances: MigInstance[] };

export type GpuLink = { nvlinks: number; pcie: PcieLevel };

/** A driver event about one card (an Xid error, or the card being lost). */
export type GpuEvent = { cardIndex: number; kind: 'xid'; xid: number } | { cardIndex: number; kind: 'lost' };

export type ProcessUtilizationSample = {
  pid: number;
  /** CPU timestamp of the sample, microseconds. */
  timestampUs: number;
  smPercent: number;
  memoryPercent: number;
};

export type UtilizationRates = { gpuPercent: number; memoryPercent: number };

export type MemoryUsage = { totalBytes: number; usedBytes: number; freeBytes: number };

/** A compute process on a card, as NVML lists it (host pid). */
export type RunningProcess = {
  pid: number;
  /** Device memory the driver holds for the process on this card; null when NVML cannot say (MIG, WDDM). */
  usedGpuMemoryBytes: number | null;
};

export interface GpuSource {
  listCards(): GpuCard[];
  /** Link between two cards (by index); symmetric. */
  link(a: number, b: number): GpuLink;
  memoryUsage(cardIndex: number): MemoryUsage;
  /**
   * Next driver event, or undefined after `timeoutMs` without one (or once `signal` aborts, where the
   * source can stop early). Does not block the event loop.
   */
  waitEvent(timeoutMs: number, signal?: AbortSignal): Promise<GpuEvent | undefined>;
  /** Per-process samples newer than `sinceUs` (0: everything buffered); empty when none. */
  processUtilization(cardIndex: number, sinceUs: number): ProcessUtilizationSample[];
  /**
   * Whether the card reports per-process utilization at all (false on MIG, where NVML answers
   * NOT_SUPPORTED); absent: assumed to.
   */
  processUtilizationSupported?(cardIndex: number): boolean;
  utilizationRates(cardIndex: number): UtilizationRates;
  /** The card's compute processes and their device memory; null when the driver cannot list them. */
  runningProcesses(cardIndex: number): RunningProcess[] | null;
  /** The card's MIG layout now; null when it has no MIG. Absent: the source knows nothing of MIG. */
  migLayout?(cardIndex: number): CardMig | null;
  /** Creating and destroying MIG instances (dynamic MIG); absent or undefined: the source cannot. */
  migControl?(): MigControl | undefined;
  close(): void;
}

/** NVML topology levels (nvmlGpuTopologyLevel_t) to the inventory's names. */
export function pcieLevelOf(nvmlLevel: number): PcieLevel {
  if (nvmlLevel <= 0) return 'internal';
  if (nvmlLevel <= 10) return 'single';
  if (nvmlLevel <= 20) return 'multiple';
  if (nvmlLevel <= 30) return 'hostbridge';
  if (nvmlLevel <= 40) return 'node';
  return 'system';
}

export type GpuInstanceState = Readonly<{
  gpuInstanceId: number;
  profileId: number;
  start: number;
  size: number;
  computeInstanceIds: readonly number[];
}>;

/** What dynamic MIG (mig/dynamic-mig.ts) needs from NVML (nvml-mig-control.ts; a card by its index). */
export interface MigControl {
  setMigMode(card: number, on: boolean): void;
  gpuInstances(card: number): GpuInstanceState[];
  createGpuInstance(card: number, profileId: number, start: number, size: number): number;
  createComputeInstance(card: number, gpuInstanceId: number): number;
  destroyComputeInstance(card: number, gpuInstanceId: number, computeInstanceId: number): void;
  destroyGpuInstance(card: number, gpuInstanceId: number): void;
}
