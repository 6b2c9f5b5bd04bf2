/**
 * The dashboard's view of the ledger: cards with their live allocations read from the ledger's
 * tables, quotas, GPU-hours and idle allocations through the db's report runner, refusals from
 * whatever log the control plane passes in. Every cluster sharing the ledger shows up.
 */
import { asc, ne, sql } from 'drizzle-orm';
import { rowsOf, type VcudaDb } from '../../db/connect.js';
import { allocations, cards, clusters, nodes } from '../../db/schema.js';
import type {
  CardState,
  ClusterState,
  DashboardSource,
  GpuHoursRow,
  IdleAllocation,
  NodeAgentHealth,
  Preemption,
  QuotaUse,
  Refusal,
  UnplacedGpuPod,
} from './source.js';

type ReportRow = Record<string, string | number | null>;

/** The idle report's own defaults (db/reports.ts), which the page names. */
const DEFAULT_IDLE_MINUTES = 30;
const DEFAULT_IDLE_BELOW_PCT = 5;

/** The subset of the db's report runner (`createReportRunner`) the dashboard uses. */
export type ReportRunner = {
  run(
    name: 'gpu-hours' | 'quota-usage' | 'idle',
    params: { since?: Date; until?: Date; groupBy?: 'namespace'; limit?: number },
  ): Promise<{ rows: ReportRow[] }>;
};

/** Cards a node reports now (the control plane's watch of Node inventories), with their health. */
export type LiveNodeCards = {
  cluster: string;
  node: string;
  cards: {
    uuid: string;
    index: number;
    model: string;
    memoryMiB: number;
    healthy: boolean;
    memoryBurst?: boolean;
    /** A card in MIG mode (served only as its instances). */
    migMode?: boolean;
    /** A whole MIG instance: its parent, profile and placement. */
    mig?: NonNullable<CardState['mig']>;
  }[];
  /** Whether the node's agent still reports (its heartbeat within the control plane's limit). */
  agent?: NodeAgentHealth;
};

export type LedgerSourceDeps = {
  db: VcudaDb;
  reports: ReportRunner;
  clock: () => Date;
  readRefusals: (limit: number) => Promise<Refusal[]>;
  /** Recent preemptions (from Events, not the ledger); absent: none shown. */
  readPreemptions?: (limit: number) => Promise<Preemption[]>;
  /** GPU pods on nodes holding no cards (the control plane's cluster view); absent: none shown. */
  readUnplacedPods?: () => UnplacedGpuPod[];
  /** The idle view's span (minutes); default the idle report's (30). */
  idleForMinutes?: number;
  /**
   * Optional: the nodes this control plane watches. The ledger learns a node's cards at its first
   * bind, so without this an idle node is missing from the page; with it, health shows too.
   */
  readLiveNodes?: () => LiveNodeCards[] | Promise<LiveNodeCards[]>;
};

type CardRow = {
  uuid: string;
  cluster: string;
  node: string;
  index: number;
  model: string;
  memoryMiB: number;
  isPresent: boolean;
  healthy?: boolean;
  memoryBurst?: boolean;
  migMode?: boolean;
  mig?: NonNullable<CardState['mig']>;
};

const str = (v: ReportRow[string] | undefined) => (v === null || v === undefined ? '' : String(v));
const num = (v: ReportRow[string] | undefined) => (v === null || v === undefined ? 0 : Number(v));

type AllocationRow = {
  cluster: string;
  podUid: string;
  namespace: string;
  pod: string;
  container: string;
  cardUuid: string;
  core: number;
  memoryMiB: number;
  state: string;
  reservedAt: Date;
};

/** The ledger's cards with the live view's word on health, plus live cards the ledger has not seen yet; sorted. */
function withLiveCards(ledgerCards: CardRow[], liveNodes: readonly LiveNodeCards[]): CardRow[] {
  const live = new Map<string, CardRow>();
  for (const n of liveNodes) {
    for (const c of n.cards) live.set(c.uuid, { ...c, cluster: n.cluster, node: n.node, isPresent: true });
  }
  const cardRows: CardRow[] = ledgerCards.map((c) => {
    const l = live.get(c.uuid);
    if (!l) return c;
    return {
      ...c,
      healthy: l.healthy,
      ...(l.memoryBurst === undefined ? {} : { memoryBurst: l.memoryBurst }),
      ...(l.migMode ? { migMode: true } : {}),
      ...(l.mig ? { mig: l.mig } : {}),
    };
  });
  const known = new Set(ledgerCards.map((c) => c.uuid));
  for (const l of live.values()) if (!known.has(l.uuid)) cardRows.push(l);
  cardRows.sort((a, b) => a.cluster.localeCompare(b.cluster) || a.node.localeCompare(b.node) || a.index - b.index);
  return cardRows;
}

/** Live allocations per card, as the dashboard shows them. */
function allocationsByCard(allocationRows: readonly AllocationRow[]): Map<string, CardState['allocations']> {
  const byCard = new Map<string, CardState['allocations']>();
  for (const a of allocationRows) {
    const list = byCard.get(a.cardUuid) ?? [];
    list.push({
      cluster: a.cluster,
      namespace: a.namespace,
      pod: a.pod,
      podUid: a.podUid,
      container: a.container,
      core: a.core,
      memoryMiB: a.memoryMiB,
      state: a.state === 'reserved' ? 'reserved' : 'bound',
      since: a.reservedAt.toISOString(),
    });
    byCard.set(a.cardUuid, list);
  }
  return byCard;
}

/** Groups card rows and their live allocations into clusters → nodes → cards. */
export function groupCapacity(
  ledgerCards: CardRow[],
  allocationRows: AllocationRow[],
  liveNodes: readonly LiveNodeCards[] = [],
): ClusterState[] {
  const cardRows = withLiveCards(ledgerCards, liveNodes);
  const byCard = allocationsByCard(allocationRows);
  const clusters = new Map<string, Map<string, CardState[]>>();
  for (const c of cardRows) {
    // A card the node no longer reports still matters while pods hold it.
    const held = byCard.get(c.uuid) ?? [];
    if (!c.isPresent && held.length === 0) continue;
    const nodes = clusters.get(c.cluster) ?? new Map<string, CardState[]>();
    const list = nodes.get(c.node) ?? [];
    list.push({
      uuid: c.uuid,
      index: c.index,
      model: c.model,
      memoryMiB: c.memoryMiB,
      ...(!c.isPresent ? { healthy: false } : c.healthy !== undefined ? { healthy: c.healthy } : {}),
      ...(c.memoryBurst === undefined ? {} : { memoryBurst: c.memoryBurst }),
      ...(c.migMode ? { instances: [] } : {}),
      ...(c.mig ? { mig: c.mig } : {}),
      allocations: held,
    });
    nodes.set(c.node, list);
    clusters.set(c.cluster, nodes);
  }
  const agents = new Map(liveNodes.map((n) => [`${n.cluster}/${n.node}`, n.agent]));
  return [...clusters].map(([name, nodes]) => ({
    name,
    nodes: [...nodes].map(([node, nodeCards]) => {
      const agent = agents.get(`${name}/${node}`);
      return { name: node, cards: nestInstances(nodeCards), ...(agent ? { agent } : {}) };
    }),
  }));
}

/**
 * A MIG card drawn as its instances: each instance the ledger holds as a card of its own goes
 * under its parent, by placement; one whose parent the node no longer reports stays a card.
 */
function nestInstances(cards: CardState[]): CardState[] {
  const byUuid = new Map(cards.map((c) => [c.uuid, c]));
  const out: CardState[] = [];
  for (const c of cards) {
    const parent = c.mig && byUuid.get(c.mig.parent);
    if (!parent) {
      out.push(c);
      continue;
    }
    parent.instances = [...(parent.instances ?? []), c].sort((a, b) => (a.mig?.start ?? 0) - (b.mig?.start ?? 0));
  }
  return out;
}

/**
 * A usage sample this recent still says whether a pod bursts: node agents report every 10 s by
 * default, so a pod that stopped bursting, or ended, loses its badge within minutes.
 */
export const BURST_FRESH_MS = 5 * 60_000;

type BurstRow = {
  cluster: string;
  pod_uid: string;
  container: string;
  card_uuid: string;
  mib: number;
  evicted: number;
};

/** Each container's burst on each card from its latest raw usage sample, when that ended recently and bursts. */
async function readBursts(db: VcudaDb, now: Date): Promise<Map<string, { mib: number; evictedMiB: number }>> {
  const rows = rowsOf<BurstRow>(
    await db.execute(sql`
      select * from (
        select distinct on (cluster, pod_uid, container, card_uuid) cluster, pod_uid, container, card_uuid,
          memory_burst_mib as mib, memory_burst_evicted_mib as evicted
        from usage_samples
        where resolution = 'raw'
          and sampled_at >= ${new Date(now.getTime() - BURST_FRESH_MS - 3_600_000).toISOString()}::timestamptz
          and sampled_at + period_s * interval '1 second' >= ${new Date(now.getTime() - BURST_FRESH_MS).toISOString()}::timestamptz
        order by cluster, pod_uid, container, card_uuid, sampled_at desc
      ) latest
      where mib > 0`),
  );
  return new Map(
    rows.map((r) => [
      burstKeyOf(r.cluster, r.pod_uid, r.container, r.card_uuid),
      { mib: Number(r.mib), evictedMiB: Number(r.evicted) },
    ]),
  );
}

const burstKeyOf = (cluster: string, podUid: string, container: string, cardUuid: string) =>
  JSON.stringify([cluster, podUid, container, cardUuid]);

/** Marks each allocation with its container's burst on that card (from readBursts). */
export function markBursts(
  clusters: ClusterState[],
  bursts: ReadonlyMap<string, { mib: number; evictedMiB: number }>,
): ClusterState[] {
  if (bursts.size === 0) return clusters;
  for (const cl of clusters) {
    for (const n of cl.nodes) {
      for (const c of n.cards) {
        for (const a of c.allocations) {
          const burst = bursts.get(burstKeyOf(a.cluster, a.podUid, a.container, c.uuid));
          if (burst) a.burst = burst;
        }
      }
    }
  }
  return clusters;
}

export function quotaFromReport(r: ReportRow): QuotaUse {
  const scope = r.scope === 'team' ? 'team' : 'namespace';
  const subject = str(r.subject);
  const slash = subject.indexOf('/');
  return {
    scope,
    // A namespace quota's subject is `cluster/namespace`, a team's is the team.
    name: scope === 'team' || slash < 0 ? subject : subject.slice(slash + 1),
    ...(scope === 'namespace' && slash >= 0 ? { cluster: subject.slice(0, slash) } : {}),
    ...(str(r.gpuModel) ? { gpuModel: str(r.gpuModel) } : {}),
    coreLimit: num(r.coreLimit),
    coreUsed: num(r.coreUsed),
    memoryLimitMiB: num(r.memoryLimitMiB),
    memoryUsedMiB: num(r.memoryUsedMiB),
  };
}

export function idleFromReport(r: ReportRow, now: Date): IdleAllocation {
  const since = Date.parse(str(r.heldSince));
  return {
    cluster: str(r.cluster),
    namespace: str(r.namespace),
    holder: r.holder === 'claim' ? 'claim' : 'pod',
    pod: str(r.pod),
    node: str(r.node),
    cardUuid: str(r.card),
    core: num(r.core),
    memoryMiB: num(r.memoryMiB),
    heldMs: Number.isNaN(since) ? 0 : Math.max(0, now.getTime() - since),
    ...(r.meanSmPct === null || r.meanSmPct === undefined ? {} : { utilizationPct: num(r.meanSmPct) }),
  };
}

export function gpuHoursFromReport(r: ReportRow): GpuHoursRow {
  return {
    cluster: str(r.cluster),
    namespace: str(r.namespace),
    ...(str(r.team) ? { team: str(r.team) } : {}),
    allocatedGpuHours: num(r.allocatedGpuHours),
    usedGpuHours: num(r.usedGpuHours),
  };
}

export function createLedgerDashboardSource(deps: LedgerSourceDeps): DashboardSource {
  return {
    async readClusters() {
      // Only the columns the page shows: row transfer dominates the cost on large ledgers.
      const [cardRows, allocationRows, liveNodes, bursts] = await Promise.all([
        deps.db
          .select({
            uuid: cards.uuid,
            cluster: cards.cluster,
            node: cards.node,
            index: cards.index,
            model: cards.model,
            memoryMiB: cards.memoryMiB,
            isPresent: cards.isPresent,
          })
          .from(cards)
          .orderBy(asc(cards.cluster), asc(cards.node), asc(cards.index)),
        deps.db
          .select({
            cluster: allocations.cluster,
            podUid: allocations.podUid,
            namespace: allocations.namespace,
            pod: allocations.pod,
            container: allocations.container,
            cardUuid: allocations.cardUuid,
            core: allocations.core,
            memoryMiB: allocations.memoryMiB,
            state: allocations.state,
            reservedAt: allocations.reservedAt,
          })
          .from(allocations)
          .where(ne(allocations.state, 'released')),
        deps.readLiveNodes?.() ?? [],
        readBursts(deps.db, deps.clock()),
      ]);
      return markBursts(groupCapacity(cardRows, allocationRows, liveNodes), bursts);
    },
    async readClusterNames() {
      // Small tables: a cluster is registered with its first node (vcuda_upsert_node).
      const [registered, withNodes, liveNodes] = await Promise.all([
        deps.db.select({ name: clusters.name }).from(clusters),
        deps.db.selectDistinct({ name: nodes.cluster }).from(nodes),
        deps.readLiveNodes?.() ?? [],
      ]);
      const names = [...registered, ...withNodes].map((r) => r.name);
      return [...new Set([...names, ...liveNodes.map((n) => n.cluster)])].sort();
    },
    async readQuotas() {
      return (await deps.reports.run('quota-usage', {})).rows.map(quotaFromReport);
    },
    async readReports(window) {
      const [hours, idle] = await Promise.all([
        deps.reports.run('gpu-hours', { since: window.from, until: window.to, groupBy: 'namespace' }),
        deps.reports.run('idle', {
          since: window.from,
          until: window.to,
          ...(deps.idleForMinutes ? { idleForMinutes: deps.idleForMinutes } : {}),
        }),
      ]);
      const now = deps.clock();
      return {
        // The report has one row per day; the page shows the whole window.
        gpuHours: hours.rows.map(gpuHoursFromReport),
        idle: idle.rows.map((r) => idleFromReport(r, now)),
        idleCriteria: { forMinutes: deps.idleForMinutes ?? DEFAULT_IDLE_MINUTES, belowPct: DEFAULT_IDLE_BELOW_PCT },
      };
    },
    readRefusals: deps.readRefusals,
    ...(deps.readPreemptions ? { readPreemptions: deps.readPreemptions } : {}),
    ...(deps.readUnplacedPods ? { readUnplacedPods: async () => deps.readUnplacedPods?.() ?? [] } : {}),
  };
}
