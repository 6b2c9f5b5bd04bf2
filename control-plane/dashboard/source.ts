/**
 * What the dashboard reads, declared by the dashboard (the consumer) and kept as small as the page
 * needs. The ledger adapter (`ledger-source.ts`) and the refusal log implement it; tests pass fakes.
 * Quantities use the ledger's units: core in hundredths of a card, memory in MiB.
 */

/**
 * One container's share of one card, as the ledger holds it. A DRA claim's share has the claim's
 * ledger holder as `podUid` (`claim:<uid>`, contract/dra.ts), its name as `pod` and
 * `<request>/<shareID>` as `container`.
 */
export type CardAllocation = {
  cluster: string;
  namespace: string;
  pod: string;
  podUid: string;
  container: string;
  /** Hundredths of this card, 1..100. */
  core: number;
  memoryMiB: number;
  /** `reserved` until the Binding succeeded, then `bound`. */
  state: 'reserved' | 'bound';
  /** ISO-8601 time the ledger row was written. */
  since: string;
  /**
   * Memory held above the request (vcuda-memory-limit) in its latest usage sample, and of it on
   * the host; absent when it is not bursting (or the source does not know).
   */
  burst?: { mib: number; evictedMiB: number };
};

export type CardState = {
  uuid: string;
  index: number;
  model: string;
  memoryMiB: number;
  /** Absent when the source does not know (the ledger does not track health). */
  healthy?: boolean;
  /**
   * Whether the card serves memory above a pod's request (concurrent managed access, as its node
   * publishes it); absent when not known. false: vcuda-memory-limit is held to the request there.
   */
  memoryBurst?: boolean;
  allocations: CardAllocation[];
  /**
   * A MIG instance (`uuid` is its MIG- UUID): its parent card, profile and placement on the 8 memory
   * slices. `isShared`: it serves vcuda-core/vcuda-memory shares (several holders), not whole.
   */
  mig?: { parent: string; profile: string; start: number; size: number; isShared?: boolean };
  /** A card in MIG mode: its instances, by placement (each a CardState with `mig`); absent: not in MIG mode. */
  instances?: CardState[];
};

/**
 * Whether a node's agent is still reporting: its last heartbeat (null: never) and the limit it is
 * judged by (the control plane's `heartbeatStaleSeconds`, after which it offers the node no pods).
 */
export type NodeAgentHealth = { reporting: boolean; lastHeartbeat: string | null; limitSeconds: number };

/** `agent`: absent when the source does not know (no live view of the cluster). */
export type NodeState = { name: string; cards: CardState[]; agent?: NodeAgentHealth };

export type ClusterState = { name: string; nodes: NodeState[] };

/** Use of one quota: a namespace in one cluster, or a team across clusters. */
export type QuotaUse = {
  scope: 'namespace' | 'team';
  /** The namespace or team name. */
  name: string;
  /** Set for namespace quotas; absent for a team (it spans clusters). */
  cluster?: string;
  /** Restricts the quota to one GPU model (substring), when set. */
  gpuModel?: string;
  coreLimit: number;
  coreUsed: number;
  memoryLimitMiB: number;
  memoryUsedMiB: number;
};

/** GPU-hours in the report window of one namespace (and its team, when it has one). */
export type GpuHoursRow = {
  cluster: string;
  namespace: string;
  team?: string;
  /** Held: sum over allocations of (core / 100) x hours held. */
  allocatedGpuHours: number;
  /** Used: sum over usage samples of (SM share) x hours sampled. */
  usedGpuHours: number;
};

/** An allocation whose card did little work for it: the reclaim candidates. */
export type IdleAllocation = {
  cluster: string;
  namespace: string;
  /** A pod's share, or a DRA claim's (`pod` is then the claim's name); absent: a pod. */
  holder?: 'pod' | 'claim';
  pod: string;
  node: string;
  cardUuid: string;
  core: number;
  memoryMiB: number;
  /** How long the allocation has been held (ms). */
  heldMs: number;
  /** Mean measured utilization of the card while held, 0..100; absent when never sampled. */
  utilizationPct?: number;
};

/** What makes an allocation idle: held at least `forMinutes` with a mean SM share below `belowPct`. */
export type IdleCriteria = { forMinutes: number; belowPct: number };

export type DashboardReports = {
  gpuHours: GpuHoursRow[];
  idle: IdleAllocation[];
  /** Absent when the source does not say (the page then names no threshold). */
  idleCriteria?: IdleCriteria;
};

/** Where a pod was turned away. */
export type RefusalStage = 'admission' | 'quota' | 'scheduling' | 'bind' | 'allocate';

export type Refusal = {
  /** ISO-8601. */
  at: string;
  stage: RefusalStage;
  cluster?: string;
  namespace: string;
  pod: string;
  /** The Event reason (contract/events.ts), e.g. `VcudaQuotaRefused`. */
  reason: string;
  message: string;
};

/**
 * One side of a preemption, from its Event: the preemptor (vcuda's `VcudaPreempting`, naming the
 * victims and the cards they free) or a victim (kube-scheduler's `Preempted`, naming who took its place).
 */
export type Preemption = {
  /** ISO-8601. */
  at: string;
  role: 'preemptor' | 'victim';
  cluster?: string;
  namespace: string;
  pod: string;
  /** The Event reason: `VcudaPreempting` or `Preempted`. */
  reason: string;
  /** Who and why, as the Event says it. */
  message: string;
};

/**
 * A GPU pod on a node that holds no cards: placed by hand around vcuda (no assignment, or one that
 * did not verify), or already refused by the kubelet for it. kube-scheduler counts what it asks on
 * its node while the cards show free.
 */
export type UnplacedGpuPod = {
  cluster: string;
  namespace: string;
  pod: string;
  node: string;
  /** The pod's phase: Pending or Running while it waits, Failed once the kubelet refused it. */
  phase: string;
  reason: 'no-assignment' | 'assignment-not-verified' | 'refused-by-kubelet';
};

export type ReportWindow = { from: Date; to: Date };

export type DashboardSource = {
  readClusters(): Promise<ClusterState[]>;
  /** Every cluster the source knows (the ledger's, and the one this control plane watches). */
  readClusterNames(): Promise<string[]>;
  readQuotas(): Promise<QuotaUse[]>;
  readReports(window: ReportWindow): Promise<DashboardReports>;
  /** Most recent first, at most `limit`. */
  readRefusals(limit: number): Promise<Refusal[]>;
  /** Most recent first, at most `limit`; absent: the source knows of none. */
  readPreemptions?(limit: number): Promise<Preemption[]>;
  /** GPU pods on nodes holding no cards (from the live cluster view); absent: the source knows of none. */
  readUnplacedPods?(): Promise<UnplacedGpuPod[]>;
};
