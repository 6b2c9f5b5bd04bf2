/**
 * The ledger's tables: the only source of truth for its shape. drizzle-kit generates
 * `db/migrations/` from this file (`npx drizzle-kit generate`); never edit the SQL by hand.
 *
 * Cards and quotas carry running totals (`coreUsed`, `memoryUsedMiB`) of their active
 * allocations, so a reservation checks capacity by locking one row per card and per quota
 * instead of summing history. Every write to `allocations` updates the totals in the same
 * transaction; CHECK constraints make an overcommitted total impossible to commit.
 */
import { sql } from 'drizzle-orm';
import {
  bigserial,
  boolean,
  check,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  real,
  serial,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** A Kubernetes cluster sharing this ledger, and the public keys that verify its assignments. */
export const clusters = pgTable('clusters', {
  name: text('name').primaryKey(),
  /** JWKS (`{ keys: [...] }`) of the cluster's control plane signing keys. */
  jwks: jsonb('jwks').$type<{ keys: unknown[] }>().notNull().default({ keys: [] }),
  createdAt: ts('created_at').notNull(),
});

export const nodes = pgTable(
  'nodes',
  {
    cluster: text('cluster').notNull(),
    name: text('name').notNull(),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.cluster, t.name] })],
);

export const cards = pgTable(
  'cards',
  {
    uuid: text('uuid').primaryKey(),
    cluster: text('cluster').notNull(),
    node: text('node').notNull(),
    index: integer('index').notNull(),
    model: text('model').notNull(),
    memoryMiB: integer('memory_mib').notNull(),
    /** False once the node stops reporting the card: no new reservations on it. */
    isPresent: boolean('is_present').notNull().default(true),
    /**
     * Hundredths of a whole GPU that this ledger card's 100 core stand for in quotas and GPU-hours:
     * 100 for a card; for a MIG instance shared as a small card (its core on its own scale), the
     * part of its parent card it spans (50 for a 3g.40gb), so a 50 share of it costs 25 of a quota.
     */
    quotaWeight: integer('quota_weight').notNull().default(100),
    coreUsed: integer('core_used').notNull().default(0),
    memoryUsedMiB: integer('memory_used_mib').notNull().default(0),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [
    index('cards_cluster_node_idx').on(t.cluster, t.node),
    check('cards_core_within_card', sql`${t.coreUsed} >= 0 and ${t.coreUsed} <= 100`),
    check('cards_memory_within_card', sql`${t.memoryUsedMiB} >= 0 and ${t.memoryUsedMiB} <= ${t.memoryMiB}`),
    check('cards_quota_weight_range', sql`${t.quotaWeight} between 1 and 100`),
    // Admission's pre-check finds a cluster's cheapest card for a share from this index alone.
    index('cards_weighted_idx').on(t.cluster, t.quotaWeight).where(sql`${t.quotaWeight} < 100`),
  ],
);

/** A team groups namespaces, possibly across clusters; a namespace belongs to at most one team. */
export const teamNamespaces = pgTable(
  'team_namespaces',
  {
    team: text('team').notNull(),
    cluster: text('cluster').notNull(),
    namespace: text('namespace').notNull(),
  },
  (t) => [primaryKey({ columns: [t.cluster, t.namespace] }), index('team_namespaces_team_idx').on(t.team)],
);

/**
 * A limit for one namespace of one cluster (`scope = 'namespace'`) or for a team
 * (`scope = 'team'`), optionally only for cards of one GPU model. Core in hundredths of a card.
 */
export const quotas = pgTable(
  'quotas',
  {
    id: serial('id').primaryKey(),
    name: text('name').notNull(),
    scope: text('scope', { enum: ['namespace', 'team'] }).notNull(),
    cluster: text('cluster'),
    namespace: text('namespace'),
    team: text('team'),
    /** Empty string: every model (a unique index cannot see NULLs as equal). */
    gpuModel: text('gpu_model').notNull().default(''),
    coreLimit: integer('core_limit').notNull(),
    memoryLimitMiB: integer('memory_limit_mib').notNull(),
    coreUsed: integer('core_used').notNull().default(0),
    memoryUsedMiB: integer('memory_used_mib').notNull().default(0),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [
    uniqueIndex('quotas_name_idx').on(t.name),
    index('quotas_namespace_idx').on(t.cluster, t.namespace),
    index('quotas_team_idx').on(t.team),
    check(
      'quotas_subject',
      sql`(${t.scope} = 'namespace' and ${t.cluster} is not null and ${t.namespace} is not null and ${t.team} is null)
        or (${t.scope} = 'team' and ${t.team} is not null and ${t.cluster} is null and ${t.namespace} is null)`,
    ),
    // No `used <= limit` check: an operator may lower a limit below what is already held.
    check('quotas_used_non_negative', sql`${t.coreUsed} >= 0 and ${t.memoryUsedMiB} >= 0`),
  ],
);

export const allocationStates = ['reserved', 'bound', 'released'] as const;
export type AllocationState = (typeof allocationStates)[number];

/**
 * One row per pod that holds a reservation, keyed by (cluster, pod UID). Reserve inserts it
 * first: a second reservation of the same pod (another replica, another choice of cards)
 * waits on the key until the first commits, then sees the pod held. Release deletes it.
 * `allocated_at` records when the node agent tied the pod's containers to their devices. Reserve
 * no longer refuses a pod while another of the same container size is still starting on its node
 * (migration 0010): the node agent ties containers by device IDs, so `core_amounts` stays empty.
 */
export const podHolds = pgTable(
  'pod_holds',
  {
    cluster: text('cluster').notNull(),
    podUid: text('pod_uid').notNull(),
    namespace: text('namespace').notNull(),
    pod: text('pod').notNull(),
    reservedAt: ts('reserved_at').notNull(),
    node: text('node'),
    coreAmounts: integer('core_amounts').array().notNull().default(sql`'{}'::integer[]`),
    allocatedAt: ts('allocated_at'),
    /**
     * The control-plane replica whose bind reserved the pod (its lease is in `replica_leases`); set
     * by the reservation's transaction (migration 0014). Null for holds older than that.
     */
    owner: text('owner'),
  },
  (t) => [
    primaryKey({ columns: [t.cluster, t.podUid] }),
    index('pod_holds_pending_idx').on(t.cluster, t.node).where(sql`${t.allocatedAt} is null`),
  ],
);

/**
 * A control-plane replica's lease: renewed while the replica runs. A reservation whose owner's
 * lease lapsed was left by a replica that died mid-bind; any live replica settles it at once
 * (confirmed when its pod runs on it, released when the pod has no Binding). Times are the
 * database's own clock, so replicas' clocks never disagree about it.
 */
export const replicaLeases = pgTable(
  'replica_leases',
  {
    replica: text('replica').primaryKey(),
    cluster: text('cluster').notNull(),
    renewedAt: ts('renewed_at').notNull(),
    expiresAt: ts('expires_at').notNull(),
  },
  (t) => [index('replica_leases_cluster_idx').on(t.cluster)],
);

/** One container's share of one card. A pod is all rows with its (cluster, pod_uid). */
export const allocations = pgTable(
  'allocations',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    cluster: text('cluster').notNull(),
    podUid: text('pod_uid').notNull(),
    namespace: text('namespace').notNull(),
    pod: text('pod').notNull(),
    container: text('container').notNull(),
    node: text('node').notNull(),
    cardUuid: text('card_uuid').notNull(),
    gpuModel: text('gpu_model').notNull(),
    core: integer('core').notNull(),
    /**
     * What the row costs quotas and GPU-hours, in hundredths of a whole GPU: `core` scaled by its
     * card's quota weight, rounded up (migration 0020). NULL: `core` (rows written before 0020).
     */
    quotaCore: integer('quota_core'),
    memoryMiB: integer('memory_mib').notNull(),
    state: text('state', { enum: allocationStates }).notNull(),
    reservedAt: ts('reserved_at').notNull(),
    boundAt: ts('bound_at'),
    releasedAt: ts('released_at'),
  },
  (t) => [
    // At most one live row per (pod, container, card): a racing duplicate reserve fails here.
    uniqueIndex('allocations_live_idx')
      .on(t.cluster, t.podUid, t.container, t.cardUuid)
      .where(sql`${t.state} <> 'released'`),
    index('allocations_pod_idx').on(t.cluster, t.podUid),
    index('allocations_reserved_at_idx').on(t.reservedAt),
    index('allocations_released_at_idx').on(t.releasedAt),
    // Reports find the released rows overlapping the partial days at a window's edges from
    // this index alone, without visiting the rows of the whole window.
    index('allocations_released_reserved_idx').on(t.releasedAt, t.reservedAt),
    index('allocations_active_idx').on(t.cluster, t.namespace).where(sql`${t.state} <> 'released'`),
    check('allocations_core_range', sql`${t.core} between 1 and 100`),
    check('allocations_quota_core_range', sql`${t.quotaCore} between 1 and ${t.core}`),
    check('allocations_memory_positive', sql`${t.memoryMiB} >= 0`),
  ],
);

/**
 * GPU-seconds allocated per cluster, namespace and UTC day by allocations already released
 * (core / 100 x seconds held that day). The release adds to it, so a report over whole days
 * reads a few thousand rows here instead of every allocation of the window.
 */
export const allocationDays = pgTable(
  'allocation_days',
  {
    cluster: text('cluster').notNull(),
    namespace: text('namespace').notNull(),
    day: ts('day').notNull(),
    gpuSeconds: doublePrecision('gpu_seconds').notNull(),
  },
  (t) => [primaryKey({ columns: [t.cluster, t.namespace, t.day] }), index('allocation_days_day_idx').on(t.day)],
);

/**
 * Usage reported by node agents: per container and card, the SM share and memory used over a
 * period. Raw samples are rolled up into hourly then daily rows (`periodS` grows, `samples`
 * counts what was merged), so GPU-hours used survive downsampling unchanged.
 */
export const usageSamples = pgTable(
  'usage_samples',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    cluster: text('cluster').notNull(),
    namespace: text('namespace').notNull(),
    podUid: text('pod_uid').notNull(),
    container: text('container').notNull(),
    cardUuid: text('card_uuid').notNull(),
    /** Start of the period the row covers. */
    sampledAt: ts('sampled_at').notNull(),
    /** Seconds covered: the sampling interval for raw rows, the sum of what was merged for roll-ups. */
    periodS: real('period_s').notNull(),
    /** Mean SM share over the period, percent of the card (0..100). */
    smPct: real('sm_pct').notNull(),
    /** Peak memory used over the period. */
    memoryUsedMiB: integer('memory_used_mib').notNull(),
    /**
     * Peak managed memory held above the guarantee (vcuda-memory-limit) over the period, and the
     * peak of it evicted to host memory; 0 for a container that does not burst.
     */
    memoryBurstMiB: integer('memory_burst_mib').notNull().default(0),
    memoryBurstEvictedMiB: integer('memory_burst_evicted_mib').notNull().default(0),
    /** Seconds of the period sampled with some burst bytes on the host (the whole period or none, for a raw row). */
    burstEvictedS: real('burst_evicted_s').notNull().default(0),
    /** The driver's count of the container's burst evictions since it started, the latest in the period. */
    burstEvictions: integer('burst_evictions').notNull().default(0),
    /** 'raw', 'hour' or 'day'. */
    resolution: text('resolution', { enum: ['raw', 'hour', 'day'] }).notNull(),
    samples: integer('samples').notNull().default(1),
  },
  (t) => [
    index('usage_samples_time_idx').on(t.sampledAt),
    index('usage_samples_pod_idx').on(t.cluster, t.podUid),
    // A raw sample counts once however often it is posted (a retried or replayed report).
    uniqueIndex('usage_samples_raw_once_idx')
      .on(t.cluster, t.podUid, t.container, t.cardUuid, t.sampledAt)
      .where(sql`${t.resolution} = 'raw'`),
  ],
);

/**
 * GPU-seconds used (SM share x seconds sampled) per cluster, namespace and UTC day of the
 * sample. Recording usage adds to it, so reports over whole days need not read every sample.
 */
export const usageDays = pgTable(
  'usage_days',
  {
    cluster: text('cluster').notNull(),
    namespace: text('namespace').notNull(),
    day: ts('day').notNull(),
    usedGpuSeconds: doublePrecision('used_gpu_seconds').notNull(),
  },
  (t) => [primaryKey({ columns: [t.cluster, t.namespace, t.day] }), index('usage_days_day_idx').on(t.day)],
);

export type ClusterRow = typeof clusters.$inferSelect;
export type CardRow = typeof cards.$inferSelect;
export type QuotaRow = typeof quotas.$inferSelect;
export type AllocationRow = typeof allocations.$inferSelect;
export type UsageSampleRow = typeof usageSamples.$inferSelect;
