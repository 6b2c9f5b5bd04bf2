/**
 * What the allocation path needs from the outside world, declared by the code that uses it, and
 * the record of each tie it hands back. Card health implements `CardDirectory`; metrics, usage,
 * compute and housekeeping read `ContainerRecord`s. They import this file, never the allocator.
 */
import type { JSONWebKeySet } from 'jose';
import type { CardGrant, DeviceLimit, EventReason } from '../../contract/index.js';
import type { ListPodResourcesResponse } from '../kubelet/protocol.js';
import type { ContainerPaths } from '../limits/container-files.js';
import type { PodView } from './pod-view.js';

/** Pods bound to this node, from a watch cache. */
export interface PodSource {
  pods(): PodView[];
  /** Whether the view still shows a pod of this UID: no copy of the view (the samplers ask it every tick). */
  isShown(podUid: string): boolean;
  /** Re-lists from the API server; used once before a refusal, in case the watch lags. */
  refresh(): Promise<void>;
}

export interface PodResourcesLister {
  list(): Promise<ListPodResourcesResponse>;
}

export interface PodAnnotator {
  annotatePod(namespace: string, name: string, annotations: Record<string, string>): Promise<void>;
}

export interface EventRecorder {
  podEvent(pod: { namespace: string; name: string; uid: string }, reason: EventReason, message: string): void;
}

export type JwksSource = () => Promise<JSONWebKeySet>;

export type CardRef = {
  uuid: string;
  index: number;
  minorNumber: number;
  healthy: boolean;
  healthReason?: string;
  /**
   * A shared MIG instance (`uuid` its `MIG-…`, `index` and `minorNumber` its parent's): its core
   * group (`<parent>g<gpuInstanceId>`) and the minors of its GPU and compute instance's access
   * nodes (undefined when the driver lists none). Absent for a card.
   */
  migShare?: { coreGroup: string; capMinors: readonly [number, number] | undefined };
};

export interface CardDirectory {
  cardByUuid(uuid: string): CardRef | undefined;
}

/** A whole MIG instance of this node, with its parent card (whose health is the instance's). */
export type MigDeviceRef = {
  /** `MIG-…`. */
  uuid: string;
  profile: string;
  gpuInstanceId: number;
  computeInstanceId: number;
  placement: { start: number; size: number };
  parent: CardRef;
  /**
   * Minors of its GPU instance's and compute instance's access nodes
   * (`/dev/nvidia-caps/nvidia-cap<N>`); undefined when the driver lists none for them.
   */
  capMinors: readonly [number, number] | undefined;
};

export interface MigDirectory {
  byUuid(uuid: string): MigDeviceRef | undefined;
  /** Whether `id` is a device the plugin of `profile` advertises (an instance, or one of a dynamic card's). */
  isDeviceOf(id: string, profile: string): boolean;
}

/**
 * Dynamic MIG as PreStartContainer needs it (mig/dynamic-mig-grants.ts): the instance a dynamic
 * grant's placement names, made or adopted for the pod that holds the grant.
 */
export interface DynamicMigMaker {
  /** The `MIG-` UUID of the instance at the grant's placement, made for `podUid` if needed; throws saying why not. */
  ensure(grant: CardGrant, podUid: string): string;
  /** The `MIG-` UUID made for a placement key, if it is ready (re-learning after a restart). */
  uuidOf(placementKey: string): string | undefined;
}

/** One container this agent tied to its devices (at PreStart, or re-learned after a restart). */
export type ContainerRecord = {
  podUid: string;
  namespace: string;
  podName: string;
  container: string;
  isInit: boolean;
  deviceIds: string[];
  /** Limit-file records, one per card; none for a container of whole MIG instances (never capped). */
  devices: DeviceLimit[];
  /** The `MIG-` UUIDs of the whole instances the container was handed; absent for cards. */
  migDevices?: readonly string[];
  paths: ContainerPaths;
  allocatedAtMs: number;
  confirmed: boolean;
  /** Whom the ledger holds the cards under, when not this pod and container (a DRA claim); absent: the pod. */
  ledgerHolder?: LedgerHolder;
};

/**
 * A holder of the control plane's ledger other than a pod: a DRA claim, held as `claim:<uid>` under
 * its name, one ledger row per allocated share (several shares may sit on one card of the record).
 */
export type LedgerHolder = { id: string; name: string; shares: readonly LedgerShare[] };

/** One ledger row of a holder: its key (the ledger's container column), card, cores and memory. */
export type LedgerShare = { key: string; cardUuid: string; cores: number; memoryBytes: number };
