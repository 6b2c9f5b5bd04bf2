/**
 * The dashboard's view model, computed from what the sources return: per-card bars, node and
 * cluster totals, fragmentation, quota percentages and report rankings. Pure, so every number
 * the page shows is tested here and the browser code only draws.
 */
import { isClaimHolder, migSpanCore, strandedOnCard } from '../../contract/index.js';
import type {
  CardState,
  ClusterState,
  DashboardReports,
  IdleAllocation,
  IdleCriteria,
  NodeAgentHealth,
  NodeState,
  Preemption,
  QuotaUse,
  Refusal,
  ReportWindow,
  UnplacedGpuPod,
} from './source.js';

export type PodOnCard = {
  /**
   * What holds the share: a pod placed by the extender, or a DRA ResourceClaim kube-scheduler
   * allocated (its ledger holder `claim:<uid>`; `pod` is then the claim's name, and its rows are
   * the claim's shares on this card).
   */
  holder: 'pod' | 'claim';
  namespace: string;
  pod: string;
  core: number;
  memoryMiB: number;
  state: 'reserved' | 'bound';
  /** Memory its containers hold above the request on this card (latest sample), summed; absent: none. */
  burst?: { mib: number; evictedMiB: number };
};

export type CardView = {
  uuid: string;
  index: number;
  model: string;
  memoryMiB: number;
  healthy: boolean | null;
  /** Whether the card serves memory bursts; null when its node does not say. */
  memoryBurst: boolean | null;
  coreUsed: number;
  memoryUsedMiB: number;
  corePct: number;
  memoryPct: number;
  /** Never expected (the ledger forbids it); shown in red when a source reports it. */
  isOvercommitted: boolean;
  pods: PodOnCard[];
  /**
   * A card in MIG mode, drawn as its instances by placement; its core and memory used are those of
   * its held instances (an instance counts the part of the card it spans). Absent: not in MIG mode.
   */
  instances?: MigInstanceView[];
};

/** A MIG instance of a card: where it sits on the 8 memory slices, and who holds it. */
export type MigInstanceView = {
  uuid: string;
  profile: string;
  start: number;
  size: number;
  memoryMiB: number;
  /** Serves vcuda-core/vcuda-memory shares (core 100 = the instance): several pods may hold it. */
  isShared: boolean;
  /** Summed over its holders (a whole instance's one holder asks core 100). */
  coreUsed: number;
  memoryUsedMiB: number;
  /** A whole instance with two holders, a shared one past its core or memory: never expected. */
  isOvercommitted: boolean;
  pods: PodOnCard[];
};

export type Totals = {
  cards: number;
  freeCards: number;
  coreUsed: number;
  coreCapacity: number;
  memoryUsedMiB: number;
  memoryCapacityMiB: number;
};

export type NodeView = {
  name: string;
  /** null when unknown; a node whose agent stopped reporting shows every card unhealthy. */
  agent: NodeAgentHealth | null;
  cards: CardView[];
  totals: Totals;
  /** Free compute summed over the node's cards that still have memory to give. */
  freeCore: number;
  /** The biggest share one new pod could still get on this node. */
  largestFreeCore: number;
  /** 0 when all free compute sits on one card, towards 100 when it is scattered in slivers. */
  fragmentationPct: number;
  /** Free compute on cards whose free memory is below `strandedBelowMiB`: unusable in practice. */
  strandedCore: number;
};

export type ClusterView = { name: string; nodes: NodeView[]; totals: Totals; nodesNotReporting: number };

export type QuotaView = QuotaUse & { corePct: number; memoryPct: number; isAtLimit: boolean };

export type RankedHours = {
  key: string;
  allocatedGpuHours: number;
  usedGpuHours: number;
  /** Used over allocated, percent; null when nothing was allocated. */
  efficiencyPct: number | null;
};

export type Overview = {
  generatedAt: string;
  window: { from: string; to: string };
  /** Every cluster the sources know, whatever the filter: the page's cluster picker. */
  clusterNames: string[];
  /** The cluster shown, or null for all. */
  cluster: string | null;
  totals: Totals;
  /** Nodes shown, and those whose agent stopped reporting. */
  nodes: number;
  nodesNotReporting: number;
  clusters: ClusterView[];
  quotas: QuotaView[];
  reports: {
    gpuHoursByNamespace: RankedHours[];
    gpuHoursByTeam: RankedHours[];
    /** Longest held first, all of them up to `maxIdleRows` (the page pages through them). */
    idle: IdleAllocation[];
    /** How many idle allocations there are, shown or not. */
    idleTotal: number;
    idleCriteria: IdleCriteria | null;
    fragmentation: {
      cluster: string;
      node: string;
      fragmentationPct: number;
      freeCore: number;
      strandedCore: number;
    }[];
  };
  refusals: Refusal[];
  /** Both sides of recent preemptions (who took whose cards, and why), newest first. */
  preemptions: Preemption[];
  /**
   * GPU pods on a node holding no cards (placed around vcuda, or refused by the kubelet for it),
   * by cluster, node and name: what kube-scheduler counts on a node the cards show free.
   */
  unplacedPods: UnplacedGpuPod[];
};

export type OverviewOptions = {
  /** Free memory below this makes the card's free compute count as stranded. */
  strandedBelowMiB: number;
  /** Rows kept in each ranking. */
  topN: number;
  /** Idle allocations sent to the page, which pages through them (a bound on the overview's size). */
  maxIdleRows: number;
};

export const defaultOverviewOptions: OverviewOptions = { strandedBelowMiB: 1024, topN: 12, maxIdleRows: 1000 };

function percent(part: number, whole: number): number {
  return whole > 0 ? Math.round((1000 * part) / whole) / 10 : 0;
}

/** Sums a pod's containers (a claim's shares) on one card into one row: operators think in pods and claims. */
function groupPods(card: CardState): PodOnCard[] {
  const byPod = new Map<string, PodOnCard>();
  for (const a of card.allocations) {
    const holder = isClaimHolder(a.podUid) ? 'claim' : 'pod';
    const key = `${holder}\u0000${a.namespace}/${a.pod}`;
    const row = byPod.get(key);
    if (row) {
      row.core += a.core;
      row.memoryMiB += a.memoryMiB;
      if (a.state === 'reserved') row.state = 'reserved';
    } else {
      byPod.set(key, {
        holder,
        namespace: a.namespace,
        pod: a.pod,
        core: a.core,
        memoryMiB: a.memoryMiB,
        state: a.state,
      });
    }
    const pod = byPod.get(key) as PodOnCard;
    if (a.burst) {
      const sum = pod.burst ?? { mib: 0, evictedMiB: 0 };
      pod.burst = { mib: sum.mib + a.burst.mib, evictedMiB: sum.evictedMiB + a.burst.evictedMiB };
    }
  }
  const name = (p: PodOnCard) => `${p.namespace}/${p.pod}\u0000${p.holder}`;
  return [...byPod.values()].sort((a, b) => b.core - a.core || name(a).localeCompare(name(b)));
}

function viewInstance(i: CardState): MigInstanceView {
  const mig = i.mig ?? { profile: '', start: 0, size: 0 };
  const pods = groupPods(i);
  const isShared = i.mig?.isShared === true;
  const coreUsed = pods.reduce((s, p) => s + p.core, 0);
  const memoryUsedMiB = pods.reduce((s, p) => s + p.memoryMiB, 0);
  return {
    uuid: i.uuid,
    profile: mig.profile,
    start: mig.start,
    size: mig.size,
    memoryMiB: i.memoryMiB,
    isShared,
    coreUsed,
    memoryUsedMiB,
    isOvercommitted: isShared ? coreUsed > 100 || memoryUsedMiB > i.memoryMiB : pods.length > 1,
    pods,
  };
}

/**
 * What an instance uses of its card: a held whole instance the part of the card it spans, and its
 * holder's memory; a shared one that part in proportion to the core its shares hold, and their memory.
 */
function cardUseOf(v: MigInstanceView): { core: number; memoryMiB: number } {
  const span = migSpanCore(v);
  if (v.isShared) return { core: Math.round((span * Math.min(100, v.coreUsed)) / 100), memoryMiB: v.memoryUsedMiB };
  if (v.pods.length === 0) return { core: 0, memoryMiB: 0 };
  return { core: span, memoryMiB: Math.max(...v.pods.map((p) => p.memoryMiB)) };
}

export function viewCard(card: CardState): CardView {
  if (card.instances) return viewMigCard(card, card.instances);
  const coreUsed = card.allocations.reduce((s, a) => s + a.core, 0);
  const memoryUsedMiB = card.allocations.reduce((s, a) => s + a.memoryMiB, 0);
  return {
    ...viewCardUse(card, coreUsed, memoryUsedMiB),
    isOvercommitted: coreUsed > 100 || memoryUsedMiB > card.memoryMiB,
    pods: groupPods(card),
  };
}

/** What every card's view says, however it is held: the card, and how much of it is in use. */
function viewCardUse(card: CardState, coreUsed: number, memoryUsedMiB: number) {
  return {
    uuid: card.uuid,
    index: card.index,
    model: card.model,
    memoryMiB: card.memoryMiB,
    healthy: card.healthy ?? null,
    memoryBurst: card.memoryBurst ?? null,
    coreUsed,
    memoryUsedMiB,
    corePct: percent(coreUsed, 100),
    memoryPct: percent(memoryUsedMiB, card.memoryMiB),
  };
}

/** A card in MIG mode: nothing of it is held but through its instances, whole or shared. */
function viewMigCard(card: CardState, instances: readonly CardState[]): CardView {
  const views = instances.map(viewInstance);
  const coreUsed = views.reduce((s, v) => s + cardUseOf(v).core, 0);
  const memoryUsedMiB = views.reduce((s, v) => s + cardUseOf(v).memoryMiB, 0);
  return {
    ...viewCardUse(card, coreUsed, memoryUsedMiB),
    isOvercommitted: views.some((v) => v.isOvercommitted),
    pods: [],
    instances: views,
  };
}

function sumTotals(cards: readonly CardView[]): Totals {
  return {
    cards: cards.length,
    // A card in MIG mode is never free whole: its free instances are drawn on it.
    freeCards: cards.filter((c) => !c.instances && c.coreUsed === 0 && c.memoryUsedMiB === 0).length,
    coreUsed: cards.reduce((s, c) => s + c.coreUsed, 0),
    coreCapacity: 100 * cards.length,
    memoryUsedMiB: cards.reduce((s, c) => s + c.memoryUsedMiB, 0),
    memoryCapacityMiB: cards.reduce((s, c) => s + c.memoryMiB, 0),
  };
}

export function viewNode(node: NodeState, opts: OverviewOptions = defaultOverviewOptions): NodeView {
  const silent = node.agent?.reporting === false;
  // Nothing a silent agent said still holds: its cards may be gone or broken.
  const cards = [...node.cards]
    .sort((a, b) => a.index - b.index)
    .map(viewCard)
    .map((c) => (silent ? { ...c, healthy: false } : c));
  let freeCore = 0;
  let largestFreeCore = 0;
  let strandedCore = 0;
  let partlyFreeCore = 0;
  const smallest = { core: 1, memoryMiB: opts.strandedBelowMiB };
  for (const c of cards) {
    // A card in MIG mode offers no core to shares: only its free instances, drawn on the card.
    if (c.instances) continue;
    const free = Math.max(0, 100 - c.coreUsed);
    const stranded = strandedOnCard(c, smallest).core;
    if (stranded > 0) {
      strandedCore += stranded;
      continue;
    }
    freeCore += free;
    largestFreeCore = Math.max(largestFreeCore, free);
    if (free < 100) partlyFreeCore += free;
  }
  return {
    name: node.name,
    agent: node.agent ?? null,
    cards,
    totals: sumTotals(cards),
    freeCore,
    largestFreeCore,
    // Free compute on partly used cards: shares can use it, a whole-card pod cannot. An idle node is 0 %.
    fragmentationPct: freeCore > 0 ? Math.round((100 * partlyFreeCore) / freeCore) : 0,
    strandedCore,
  };
}

export function viewQuota(q: QuotaUse): QuotaView {
  const corePct = percent(q.coreUsed, q.coreLimit);
  const memoryPct = percent(q.memoryUsedMiB, q.memoryLimitMiB);
  return { ...q, corePct, memoryPct, isAtLimit: corePct >= 100 || memoryPct >= 100 };
}

const round2 = (n: number) => Math.round(n * 100) / 100;

function rankHours(
  rows: readonly { key: string; allocatedGpuHours: number; usedGpuHours: number }[],
  topN: number,
): RankedHours[] {
  const byKey = new Map<string, { key: string; allocated: number; used: number }>();
  for (const r of rows) {
    const acc = byKey.get(r.key) ?? { key: r.key, allocated: 0, used: 0 };
    acc.allocated += r.allocatedGpuHours;
    acc.used += r.usedGpuHours;
    byKey.set(r.key, acc);
  }
  return [...byKey.values()]
    .map((r) => ({
      key: r.key,
      allocatedGpuHours: round2(r.allocated),
      usedGpuHours: round2(r.used),
      efficiencyPct: r.allocated > 0 ? Math.round((1000 * r.used) / r.allocated) / 10 : null,
    }))
    .sort((a, b) => b.allocatedGpuHours - a.allocatedGpuHours || a.key.localeCompare(b.key))
    .slice(0, topN);
}

export type OverviewInput = {
  clusters: ClusterState[];
  quotas: QuotaUse[];
  reports: DashboardReports;
  refusals: Refusal[];
  /** Absent: the source knows of none. */
  preemptions?: Preemption[];
  /** Absent: the source knows of none. */
  unplacedPods?: UnplacedGpuPod[];
  window: ReportWindow;
  now: Date;
  /** Show only this cluster (team quotas, which span clusters, stay). */
  cluster?: string;
};

/** The input restricted to one cluster; rows without a cluster (team quotas) are kept. */
function onlyCluster(input: OverviewInput, cluster: string): OverviewInput {
  const keep = (c: string | undefined) => c === undefined || c === cluster;
  return {
    ...input,
    clusters: input.clusters.filter((c) => c.name === cluster),
    quotas: input.quotas.filter((q) => keep(q.cluster)),
    reports: {
      ...input.reports,
      gpuHours: input.reports.gpuHours.filter((r) => r.cluster === cluster),
      idle: input.reports.idle.filter((r) => r.cluster === cluster),
    },
    refusals: input.refusals.filter((r) => keep(r.cluster)),
    preemptions: input.preemptions?.filter((p) => keep(p.cluster)),
    unplacedPods: input.unplacedPods?.filter((p) => p.cluster === cluster),
  };
}

const unplacedKey = (p: UnplacedGpuPod) => [p.cluster, p.node, p.namespace, p.pod].join('\u0000');

export function buildOverview(all: OverviewInput, opts: OverviewOptions = defaultOverviewOptions): Overview {
  const clusterNames = [
    ...new Set([...all.clusters.map((c) => c.name), ...all.reports.gpuHours.map((r) => r.cluster)]),
  ].sort();
  const input = all.cluster ? onlyCluster(all, all.cluster) : all;
  const clusters: ClusterView[] = [...input.clusters]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((c) => {
      const nodes = [...c.nodes].sort((a, b) => a.name.localeCompare(b.name)).map((n) => viewNode(n, opts));
      return {
        name: c.name,
        nodes,
        totals: sumTotals(nodes.flatMap((n) => n.cards)),
        nodesNotReporting: nodes.filter((n) => n.agent?.reporting === false).length,
      };
    });
  const allNodes = clusters.flatMap((c) => c.nodes.map((n) => ({ cluster: c.name, node: n })));
  return {
    generatedAt: input.now.toISOString(),
    window: { from: input.window.from.toISOString(), to: input.window.to.toISOString() },
    clusterNames,
    cluster: all.cluster ?? null,
    totals: sumTotals(allNodes.flatMap((n) => n.node.cards)),
    nodes: allNodes.length,
    nodesNotReporting: clusters.reduce((n, c) => n + c.nodesNotReporting, 0),
    clusters,
    quotas: input.quotas
      .map(viewQuota)
      .sort(
        (a, b) => Math.max(b.corePct, b.memoryPct) - Math.max(a.corePct, a.memoryPct) || a.name.localeCompare(b.name),
      ),
    reports: {
      gpuHoursByNamespace: rankHours(
        input.reports.gpuHours.map((r) => ({ ...r, key: `${r.cluster}/${r.namespace}` })),
        opts.topN,
      ),
      gpuHoursByTeam: rankHours(
        input.reports.gpuHours.filter((r) => r.team).map((r) => ({ ...r, key: r.team as string })),
        opts.topN,
      ),
      idle: [...input.reports.idle].sort((a, b) => b.heldMs - a.heldMs).slice(0, opts.maxIdleRows),
      idleTotal: input.reports.idle.length,
      idleCriteria: input.reports.idleCriteria ?? null,
      fragmentation: allNodes
        .map(({ cluster, node }) => ({
          cluster,
          node: node.name,
          fragmentationPct: node.fragmentationPct,
          freeCore: node.freeCore,
          strandedCore: node.strandedCore,
        }))
        .sort((a, b) => b.fragmentationPct - a.fragmentationPct || b.strandedCore - a.strandedCore)
        .slice(0, opts.topN),
    },
    refusals: [...input.refusals].sort((a, b) => b.at.localeCompare(a.at)),
    preemptions: [...(input.preemptions ?? [])].sort((a, b) => b.at.localeCompare(a.at)),
    unplacedPods: [...(input.unplacedPods ?? [])].sort((a, b) => unplacedKey(a).localeCompare(unplacedKey(b))),
  };
}
