/**
 * The ledger: the single arbiter of GPU capacity and quota across every cluster sharing this
 * database.
 *
 * Concurrency: reservations and releases go to the server-side function `vcuda_ledger_apply`
 * (migration 0012), one call per batch: the ones made while a batch is in flight share the next
 * one (group commit, `group-commit.ts`), one transaction and one WAL flush for all of them. The
 * function locks the rows it will change with `SELECT ... FOR UPDATE`: the new pods' hold rows,
 * then cards by uuid, then quotas by id, so racing batches (of other replicas too) queue on the
 * first row they share instead of deadlocking, and the loser re-reads the winner's totals before
 * it decides. Row locks were chosen over SERIALIZABLE because racing pods conflict on purpose
 * (the last capacity of a card), where SERIALIZABLE would abort and retry whole transactions. A
 * hot card or team quota stays locked until its transaction's commit has flushed, which is what
 * bounds throughput on it; one batch pays that wait once for all its operations. The rules and
 * their words live in the SQL only: the quota refusal in `vcuda_quota_refusals` (migration 0013),
 * which admission's pre-check asks as well, so the two cannot disagree. `ledger-functions.test.ts`
 * holds the SQL to an independent statement of the rules (test/support/db/ledger-spec.ts).
 * Deadlocks (possible only against administrative operations and other replicas' batches) are retried.
 */
import { and, eq, ne, sql } from 'drizzle-orm';
import { z } from 'zod';
import {
  DRA_CLAIM_HOLDER_PREFIX,
  fieldErrorsFromZod,
  isClaimHolder,
  ValidationError,
  VcudaError,
} from '../contract/index.js';
import { rawQueryOf, rowsOf, type VcudaDb } from './connect.js';
import { createGroupCommit } from './group-commit.js';
import { createLedgerHolds, type LedgerQuery } from './ledger-holds.js';
import { pgErrorCode, retryTransient, UNIQUE_VIOLATION } from './pg-errors.js';
import { createQuotaAdmin, type QuotaRequest } from './quotas.js';
import { allocations } from './schema.js';
import { createUsageStore } from './usage.js';

/**
 * A card as the ledger registers it. `quotaWeight`: hundredths of a whole GPU its 100 core stand
 * for in quotas and GPU-hours (a shared MIG instance's span of its parent); absent: 100.
 */
export type LedgerCard = { uuid: string; index: number; model: string; memoryMiB: number; quotaWeight?: number };
export type ReserveItem = { container: string; cardUuid: string; core: number; memoryMiB: number };
/** Who holds a reservation, as its refusals name the asker ("pod asks 30", "claim asks 30"). */
export type HolderKind = 'pod' | 'claim';
export type ReserveRequest = {
  cluster: string;
  podUid: string;
  namespace: string;
  pod: string;
  node: string;
  items: ReserveItem[];
  /** Absent: a pod. A ResourceClaim's allocation (`podUid` its holder id, `pod` its name) is a `claim`. */
  holderKind?: HolderKind;
};
/**
 * A card named by its index on the request's node (`memoryMiB: null`: the card's whole memory), or
 * a ledger card named by its UUID (a MIG instance or memory slice a partition holds, migration 0019).
 */
export type ChargeItem =
  | { container: string; cardIndex: number; core: number; memoryMiB: number | null }
  | { container: string; cardUuid: string; core: number; memoryMiB: number };
export type ChargeRequest = Omit<ReserveRequest, 'items'> & { items: ChargeItem[] };
export type LivePod = { uid: string; namespace: string; name: string };
export type LedgerOptions = {
  clock: () => Date;
  /**
   * Group commit (`vcuda_ledger_apply`, migration 0012): reservations and releases that arrive
   * while a batch is in flight go out together as the next one, up to `maxBatch` per transaction
   * and `maxInFlight` batches at once. On by default (`DEFAULT_GROUP_COMMIT`); `false`: every
   * operation is its own transaction. Callers see the same results either way.
   */
  groupCommit?: { maxBatch: number; maxInFlight?: number } | false;
  /**
   * The control-plane replica this ledger reserves for (its lease: `renewLease`); the holds it
   * makes name it as their owner. Absent: holds without an owner, settled only by age.
   */
  replica?: string;
};

export const DEFAULT_GROUP_COMMIT = { maxBatch: 64, maxInFlight: 1 } as const;

const name = z.string().min(1).max(253);
const core = z.number().int().min(1).max(100);
const memoryMiB = z.number().int().min(0);

/** A holder's request: who holds, where, and at least one item, each container naming a card once. */
function holdRequestSchema<Item extends z.ZodType<{ container: string }>>(
  item: Item,
  cardOf: (item: z.infer<Item>) => string,
) {
  return z.object({
    cluster: name,
    podUid: name,
    namespace: name,
    pod: name,
    node: name,
    holderKind: z.enum(['pod', 'claim']).optional(),
    items: z
      .array(item)
      .min(1)
      .refine((items) => new Set(items.map((i) => `${i.container}\u0000${cardOf(i)}`)).size === items.length, {
        message: 'a container may name each card once',
      }),
  });
}
const reserveRequestSchema = holdRequestSchema(
  z.object({ container: name, cardUuid: name, core, memoryMiB }),
  (i) => i.cardUuid,
);
const chargeRequestSchema = holdRequestSchema(
  z.union([
    z.object({ container: name, cardIndex: z.number().int().min(0), core, memoryMiB: memoryMiB.nullable() }),
    z.object({ container: name, cardUuid: name, core, memoryMiB }),
  ]),
  (i) => ('cardUuid' in i ? i.cardUuid : `#${i.cardIndex}`),
);

const cardSchema = z.object({
  uuid: name,
  index: z.number().int().min(0),
  model: name,
  memoryMiB: z.number().int().positive(),
  quotaWeight: z.number().int().min(1).max(100).optional(),
});

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationError(fieldErrorsFromZod(result.error.issues), what);
  return result.data;
}

/** One reason the ledger refuses a reservation, as its SQL functions word it. */
export type Violation = {
  code: 'capacity-conflict' | 'quota-exceeded' | 'not-found' | 'invalid';
  message: string;
};

/** The most specific error wins: a bad request before a lost race before a full quota. */
function throwViolations(what: string, violations: readonly Violation[]): void {
  if (violations.length === 0) return;
  const order: Violation['code'][] = ['invalid', 'not-found', 'capacity-conflict', 'quota-exceeded'];
  const code = order.find((c) => violations.some((v) => v.code === c)) ?? 'capacity-conflict';
  throw new VcudaError(code, `${what}: ${violations.map((v) => v.message).join('; ')}`);
}

/** A reservation's verdict from `vcuda_ledger_apply`: a JSON object, parsed by postgres.js and PGlite alike. */
type ReserveVerdict = { reused: boolean } | { violations: Violation[] };
/** One operation of `vcuda_ledger_apply` (migration 0012), or a charge (migration 0018). */
type ReserveOp = { op: 'reserve'; at: string } & ReserveRequest;
type ChargeOp = { op: 'charge'; at: string } & ChargeRequest;
type ReleaseOp = { op: 'release'; cluster: string; podUid: string; at: string; onlyState: string | null };
type LedgerOp = ReserveOp | ChargeOp | ReleaseOp;
type LedgerOpResult = ReserveVerdict | { released: number };

// In the name of the replica making it (migration 0014: the holds it inserts name their owner).
const APPLY_SQL = 'select vcuda_ledger_apply_as($1::jsonb, $2::text) as r';
// A batch with a charge: the same, with each charge's cards found by index or UUID and its rows bound (0018, 0019).
const APPLY_CHARGES_SQL = 'select vcuda_ledger_apply_charges($1::jsonb, $2::text) as r';
const UPSERT_NODE_SQL = 'select vcuda_upsert_node($1, $2, $3::jsonb, $4::timestamptz)';

// One prepared statement each, like reserve: the query builder cost more client CPU than the call.
const CONFIRM_SQL = `with bound as (
  update allocations set state = 'bound', bound_at = $3::timestamptz
  where cluster = $1 and pod_uid = $2 and state <> 'released' returning 1)
select count(*)::int as n from bound`;
const MARK_ALLOCATED_SQL = `update pod_holds set allocated_at = $3::timestamptz
where cluster = $1 and allocated_at is null and pod_uid in (select jsonb_array_elements_text($2::jsonb))`;
const CONFIRM_MANY_SQL = `update allocations set state = 'bound', bound_at = $3::timestamptz
where cluster = $1 and pod_uid in (select jsonb_array_elements_text($2::jsonb)) and state <> 'released'
returning pod_uid`;

// Admission's pre-check runs for every GPU pod the API server creates: one prepared statement
// asking the reservation's own quota rule, read-only (vcuda_quota_precheck, migrations 0013 and
// 0017: worded for the holder kind asking; 0020: shares priced at the cluster's lightest card).
const PRECHECK_SQL = 'select vcuda_quota_precheck($1, $2, $3::int, $4::int, $5, $6, $7::int) as r';

const parseJson = <T>(value: unknown): T => (typeof value === 'string' ? JSON.parse(value) : value) as T;

/** A statement with numbered placeholders, straight to the driver when it is ours. */
type Query = LedgerQuery;

/**
 * The hot calls (reserve, confirm, release, node registration) go straight to the driver when it
 * is ours: the query builder costs more client CPU than the call itself.
 */
function queryOf(db: VcudaDb): Query {
  const raw = rawQueryOf(db);
  return async <T>(text: string, params: unknown[]): Promise<T[]> => {
    if (raw) return (await raw(text, params)) as T[];
    // Split keeps the placeholder numbers at odd positions, so $3 before $1 binds the right value.
    const parts = text.split(/\$(\d+)/);
    const built = sql.join(
      parts.map((part, i) => (i % 2 === 0 ? sql.raw(part) : sql`${params[Number(part) - 1]}`)),
      sql``,
    );
    return rowsOf<T>(await db.execute(built));
  };
}

/**
 * How reservations and releases reach `vcuda_ledger_apply`: grouped into shared transactions
 * (group commit) or one transaction each. Reservations are made in `replica`'s name (the hold's
 * owner, migration 0014), so another replica can tell a dead one's leftovers from its own.
 */
function submitterOf(query: Query, opts: LedgerOptions): (op: LedgerOp) => Promise<LedgerOpResult> {
  const replica = opts.replica ?? null;
  async function applyBatch(ops: readonly LedgerOp[]): Promise<LedgerOpResult[]> {
    const text = ops.some((op) => op.op === 'charge') ? APPLY_CHARGES_SQL : APPLY_SQL;
    const rows = await query<{ r: unknown }>(text, [JSON.stringify(ops), replica]);
    const results = parseJson<LedgerOpResult[] | null>(rows[0]?.r);
    if (!Array.isArray(results)) throw new Error(`vcuda_ledger_apply answered ${JSON.stringify(results)}`);
    return results;
  }

  /** One operation in its own transaction, retried when it lost a deadlock or a race. */
  async function runOne(op: LedgerOp): Promise<LedgerOpResult> {
    try {
      const [result] = await retryTransient(() => applyBatch([op]));
      if (!result) throw new Error(`vcuda_ledger_apply answered nothing for ${op.op} ${op.podUid}`);
      return result;
    } catch (err) {
      // The same pod raced itself (two replicas binding it): the other one holds it.
      if (op.op !== 'release' && pgErrorCode(err) === UNIQUE_VIOLATION) return { reused: true };
      throw err;
    }
  }

  const grouping = opts.groupCommit === undefined ? DEFAULT_GROUP_COMMIT : opts.groupCommit;
  if (!grouping) return runOne;
  return createGroupCommit<LedgerOp, LedgerOpResult>({
    maxBatch: grouping.maxBatch,
    maxInFlight: grouping.maxInFlight ?? 1,
    keyOf: (op) => `${op.cluster}\u0000${op.podUid}`,
    runOne,
    runBatch: applyBatch,
  });
}

/** A reservation's (or charge's) verdict: `{ reused }`, or its violations thrown in the ledger's words. */
function reservedOrThrow(req: { namespace: string; pod: string }, verdict: LedgerOpResult): { reused: boolean } {
  const what = `reserve ${req.namespace}/${req.pod}`;
  if ('violations' in verdict) {
    throwViolations(what, verdict.violations);
    throw new VcudaError('capacity-conflict', `${what}: refused`);
  }
  if (!('reused' in verdict)) throw new Error(`${what}: the ledger answered ${JSON.stringify(verdict)}`);
  return { reused: verdict.reused };
}

/** Releases every live row of one pod (only while still `reserved`, if asked); returns how many rows. */
type ReleasePod = (cluster: string, podUid: string, onlyState?: 'reserved') => Promise<number>;

/** Registration of nodes' cards, and a pod's reservation through its life: reserve, confirm, release. */
function reservationsOf(query: Query, submit: (op: LedgerOp) => Promise<LedgerOpResult>, clock: () => Date) {
  const releasePod: ReleasePod = async (cluster, podUid, onlyState) => {
    const at = clock().toISOString();
    const result = await submit({ op: 'release', cluster, podUid, at, onlyState: onlyState ?? null });
    return 'released' in result ? result.released : 0;
  };
  return {
    releasePod,
    /**
     * Records a node's cards; cards it no longer reports take no new reservations. One call of
     * `vcuda_upsert_node` (migration 0007): one multi-row upsert instead of a statement per card.
     */
    async upsertNode(cluster: string, node: string, nodeCards: LedgerCard[]): Promise<void> {
      const list = parse(z.array(cardSchema), nodeCards, `node ${cluster}/${node} cards`);
      // A card listed twice keeps its last entry, as the per-card upserts used to leave it.
      const byUuid = new Map(list.map((c) => [c.uuid, c]));
      const payload = JSON.stringify([...byUuid.values()]);
      const at = clock().toISOString();
      await retryTransient(() => query(UPSERT_NODE_SQL, [cluster, node, payload, at]));
    },

    /** All-or-nothing for every item of the pod; idempotent by (cluster, podUid). */
    async reserve(request: ReserveRequest): Promise<{ reused: boolean }> {
      const req = parse(reserveRequestSchema, request, 'reservation');
      return reservedOrThrow(req, await submit({ op: 'reserve', ...req, at: clock().toISOString() }));
    },

    /**
     * A reservation bound at once, its cards named by index on the node: a DRA allocation, which
     * is the grant itself. One call and one commit (`vcuda_ledger_apply_charges`, migration 0018)
     * where `reserve` then `confirm` take two; decided, refused and worded as `reserve`, and
     * idempotent the same way (`reused`: the holder was held already, nothing was written).
     */
    async charge(request: ChargeRequest): Promise<{ reused: boolean }> {
      const req = parse(chargeRequestSchema, request, 'charge');
      return reservedOrThrow(req, await submit({ op: 'charge', ...req, at: clock().toISOString() }));
    },

    /** reserved -> bound, once the Binding succeeded. Fails when the reservation expired. */
    async confirm(cluster: string, podUid: string): Promise<void> {
      const rows = await query<{ n: number }>(CONFIRM_SQL, [cluster, podUid, clock().toISOString()]);
      if (Number(rows[0]?.n ?? 0) === 0) {
        throw new VcudaError('not-found', `confirm ${cluster}/${podUid}: the pod holds no reservation (expired?)`);
      }
    },

    /**
     * `confirm` for many pods of one cluster in one statement (for callers that batch binds).
     * Does not throw for a pod without a reservation: it is returned in `missing`, in input order.
     */
    async confirmMany(cluster: string, podUids: readonly string[]): Promise<{ missing: string[] }> {
      if (podUids.length === 0) return { missing: [] };
      const at = clock().toISOString();
      const rows = await query<{ pod_uid: string }>(CONFIRM_MANY_SQL, [cluster, JSON.stringify(podUids), at]);
      const confirmed = new Set(rows.map((r) => r.pod_uid));
      return { missing: [...new Set(podUids)].filter((uid) => !confirmed.has(uid)) };
    },

    /**
     * The node agent has allocated these pods (recorded in `allocated_at`). Idempotent; pods
     * without a hold are ignored.
     */
    async markAllocated(cluster: string, podUids: readonly string[]): Promise<void> {
      if (podUids.length === 0) return;
      await query(MARK_ALLOCATED_SQL, [cluster, JSON.stringify(podUids), clock().toISOString()]);
    },

    async release(cluster: string, podUid: string): Promise<{ released: number }> {
      return { released: await releasePod(cluster, podUid) };
    },

    /**
     * Releases the pod's rows only while they are still `reserved` (never a confirmed pod's);
     * returns whether it released any.
     */
    async releaseUnconfirmed(cluster: string, podUid: string): Promise<boolean> {
      return (await releasePod(cluster, podUid, 'reserved')) > 0;
    },
  };
}

/**
 * Brings the ledger in line with a cluster's live GPU pods: releases what no longer exists and
 * reports live pods the ledger does not hold. Rows reserved after `listedAt` are left alone: the
 * pod list was taken before they existed.
 */
function reconcilerOf(db: VcudaDb, releasePod: ReleasePod) {
  return async function reconcile(
    cluster: string,
    livePods: LivePod[],
    options: { listedAt?: Date } = {},
  ): Promise<{ released: string[]; missingFromLedger: LivePod[] }> {
    const held = await db
      .selectDistinct({ podUid: allocations.podUid, reservedAt: allocations.reservedAt })
      .from(allocations)
      .where(and(eq(allocations.cluster, cluster), ne(allocations.state, 'released')));
    const liveUids = new Set(livePods.map((p) => p.uid));
    // Claims' allocations have their own reconcile (from the claims' status, control-plane/claim-ledger).
    for (let i = held.length - 1; i >= 0; i--) if (isClaimHolder(held[i]?.podUid ?? '')) held.splice(i, 1);
    const heldUids = new Set(held.map((h) => h.podUid));
    const listedAt = options.listedAt?.getTime() ?? Number.POSITIVE_INFINITY;
    const gone = [
      ...new Set(
        held.filter((h) => !liveUids.has(h.podUid) && h.reservedAt.getTime() <= listedAt).map((h) => h.podUid),
      ),
    ].sort();
    const rows = await Promise.all(gone.map((uid) => releasePod(cluster, uid)));
    const released = gone.filter((_, i) => (rows[i] ?? 0) > 0);
    return { released, missingFromLedger: livePods.filter((p) => !heldUids.has(p.uid)) };
  };
}

const CLAIM_HOLDERS_SQL = `select distinct pod_uid as "holder", reserved_at as "reservedAt" from allocations
where cluster = $1 and state <> 'released' and starts_with(pod_uid, $2)`;

// Released rows too: a claim's last period is reported after its allocation was cleared.
const CLAIM_SHARES_SQL = `select distinct pod_uid as "holder", namespace, pod as "name", node, container,
  card_uuid as "cardUuid"
from allocations
where cluster = $1 and pod_uid in (select jsonb_array_elements_text($2::jsonb)) and starts_with(pod_uid, $3)`;

/** One share of a claim as the ledger charged it: which node and card, under which key (`container`). */
export type ClaimShareRow = {
  holder: string;
  namespace: string;
  name: string;
  node: string;
  container: string;
  cardUuid: string;
};

/**
 * What the ledger of DRA claims reads besides charge/release: live claim holders, and the shares
 * of given claims (whose usage a node agent may report).
 */
function claimSupportOf(query: Query) {
  return {
    /** Every share the ledger ever charged to these claim holders (`claim:<uid>`) in a cluster, released ones included. */
    async claimShares(cluster: string, holders: readonly string[]): Promise<ClaimShareRow[]> {
      if (holders.length === 0) return [];
      return query<ClaimShareRow>(CLAIM_SHARES_SQL, [cluster, JSON.stringify(holders), DRA_CLAIM_HOLDER_PREFIX]);
    },
    /** Every claim holder with live rows in a cluster, and when it reserved. */
    async liveClaimHolders(cluster: string): Promise<{ holder: string; reservedAt: Date }[]> {
      const rows = await query<{ holder: string; reservedAt: Date | string }>(CLAIM_HOLDERS_SQL, [
        cluster,
        DRA_CLAIM_HOLDER_PREFIX,
      ]);
      return rows.map((r) => ({ holder: r.holder, reservedAt: new Date(r.reservedAt) }));
    },
  };
}

/** Admission's dry run: would this much more fit the namespace's and team's quotas now? */
function quotaPrecheckOf(query: Query) {
  return async function precheckQuota(q: {
    cluster: string;
    namespace: string;
    core: number;
    /**
     * The part of `core` that is shares (each under a whole card), which a weighted card (a
     * shared MIG instance) charges less; absent: none.
     */
    shareCore?: number;
    memoryMiB: number;
    gpuModel?: string;
    /** Who would hold it (a pod when absent), as a refusal names the asker. */
    holderKind?: HolderKind;
  }): Promise<{ ok: true } | { ok: false; message: string }> {
    // Without a model, only model-independent quotas can be judged.
    const [row] = await query<{ r: unknown }>(PRECHECK_SQL, [
      q.cluster,
      q.namespace,
      q.core,
      q.memoryMiB,
      q.gpuModel ?? '',
      q.holderKind ?? 'pod',
      Math.min(q.shareCore ?? 0, q.core),
    ]);
    const violations = parseJson<Violation[]>(row?.r) ?? [];
    if (violations.length === 0) return { ok: true };
    return { ok: false, message: `${q.namespace}: ${violations.map((v) => v.message).join('; ')}` };
  };
}

export function createLedger(db: VcudaDb, opts: LedgerOptions) {
  const { clock } = opts;
  const query = queryOf(db);
  const { releasePod, ...reservations } = reservationsOf(query, submitterOf(query, opts), clock);
  return {
    ...reservations,
    ...createLedgerHolds(query),
    reconcile: reconcilerOf(db, releasePod),
    precheckQuota: quotaPrecheckOf(query),
    ...claimSupportOf(query),
    ...createQuotaAdmin(db, { clock }),
    ...createUsageStore(db, { clock }),
  };
}

export type Ledger = ReturnType<typeof createLedger>;
export type { QuotaRequest };
