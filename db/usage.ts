/**
 * Usage samples from node agents and their downsampling. Raw samples older than a day become
 * one row per container, card and hour; hourly rows older than a month become one per day.
 * A roll-up keeps the time covered (`period_s` summed) and the time-weighted mean SM share, so
 * GPU-hours used (`sm_pct / 100 * period_s / 3600`, times the card's quota weight / 100 for a
 * shared MIG instance, whose SM share is of the instance) are the same before and after.
 */
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../contract/index.js';
import { rowsOf, type VcudaDb } from './connect.js';
import { usageDays, usageSamples } from './schema.js';
import { type AllocationLife, acceptSamples, type Period } from './usage-bounds.js';

const name = z.string().min(1).max(253);
/** Raw periods are at most an hour: `period_s` is a `real`, exact to the millisecond below ~4.6 h. */
export const MAX_RAW_PERIOD_S = 3600;
const MIN_NONZERO_PCT = 0.0001;
/** int4 in the table. */
const mib = z
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);
export const usageSampleSchema = z.object({
  cluster: name,
  namespace: name,
  podUid: name,
  container: name,
  cardUuid: name,
  /** Start of the period the sample covers. */
  sampledAt: z.date().refine((d) => !Number.isNaN(d.getTime()), { message: 'must be a valid time' }),
  /** A millisecond at least: what a `real` holds exactly, and the node agents' clock resolution. */
  periodS: z.number().min(0.001).max(MAX_RAW_PERIOD_S),
  /** Percent of the card; a share finer than a hundredth of a basis point is no measurement (and no `real`). */
  smPct: z
    .number()
    .min(0)
    .max(100)
    .refine((v) => v === 0 || v >= MIN_NONZERO_PCT, { message: `must be 0 or at least ${MIN_NONZERO_PCT}` }),
  /** int4 in the table. */
  memoryUsedMiB: mib,
  /** Peak managed memory above the guarantee over the period, and of it the peak on the host. */
  memoryBurstMiB: mib.default(0),
  memoryBurstEvictedMiB: mib.default(0),
  /** Whether some burst bytes were on the host when the period was sampled: the period counts as evicted time. */
  burstEvicted: z.boolean().default(false),
  /** The driver's count of burst evictions since the container started. */
  burstEvictions: mib.default(0),
});
export type UsageSample = z.input<typeof usageSampleSchema>;
type ParsedSample = z.output<typeof usageSampleSchema>;
/** A sample as a row: its evicted time in seconds of the (possibly trimmed) period. */
type StoredSample = Omit<ParsedSample, 'burstEvicted'> & { burstEvictedS: number };

/** What happened to a batch's samples: stored, already covered, or outside any allocation. */
export type RecordedUsage = { recorded: number; duplicate: number; outsideAllocation: number };

export type DownsampleOptions = {
  /** Raw samples older than this become hourly rows (default one day). */
  rawKeepMs?: number;
  /** Hourly rows older than this become daily rows (default 30 days). */
  hourlyKeepMs?: number;
};

const DAY_MS = 86_400_000;

async function rollUp(db: VcudaDb, from: 'raw' | 'hour', to: 'hour' | 'day', before: Date): Promise<number> {
  // Buckets are UTC hours/days; only whole buckets before the cutoff move.
  const result = await db.execute(sql`
    with moved as (
      delete from usage_samples
      where resolution = ${from}
        and sampled_at < date_trunc(${to}, ${before.toISOString()}::timestamptz at time zone 'UTC') at time zone 'UTC'
      returning *
    ), merged as (
      insert into usage_samples
        (cluster, namespace, pod_uid, container, card_uuid, sampled_at, period_s, sm_pct, memory_used_mib,
         memory_burst_mib, memory_burst_evicted_mib, burst_evicted_s, burst_evictions, resolution, samples)
      select cluster, namespace, pod_uid, container, card_uuid,
        date_trunc(${to}, sampled_at at time zone 'UTC') at time zone 'UTC',
        sum(period_s), coalesce(sum(sm_pct * period_s) / nullif(sum(period_s), 0), 0),
        max(memory_used_mib), max(memory_burst_mib), max(memory_burst_evicted_mib), sum(burst_evicted_s),
        max(burst_evictions), ${to}, sum(samples)
      from moved
      group by 1, 2, 3, 4, 5, 6
      returning 1
    )
    select (select count(*) from moved)::int as moved`);
  return rowsOf<{ moved: number }>(result)[0]?.moved ?? 0;
}

/**
 * Rows per INSERT: each sample binds 10 parameters and PostgreSQL takes at most 65,535 per
 * statement, so a node's batch of thousands is written in slices inside one transaction.
 */
export const USAGE_ROWS_PER_INSERT = 1_000;

/** What makes a raw sample the same sample: posted twice, it counts once. */
const sampleKey = (u: Pick<UsageSample, 'cluster' | 'podUid' | 'container' | 'cardUuid' | 'sampledAt'>) =>
  `${holdKey(u)}\u0000${u.sampledAt.getTime()}`;

/** One container's hold on one card: the key of its allocation and of its periods. */
const holdKey = (u: { cluster: string; podUid: string; container: string; cardUuid: string }) =>
  `${u.cluster}\u0000${u.podUid}\u0000${u.container}\u0000${u.cardUuid}`;

/**
 * GPU-seconds used per (cluster, namespace, UTC day of the sample), in a fixed (lock) order, on
 * whole cards' scale: a sample of a weighted ledger card (a shared MIG instance, whose SM share is
 * of the instance) counts its card's quota weight of it, as its allocation does.
 */
function usedPerDay(samples: readonly StoredSample[], weightOf: (u: StoredSample) => number) {
  const perDay = new Map<string, { cluster: string; namespace: string; day: Date; usedGpuSeconds: number }>();
  for (const u of samples) {
    const day = new Date(Math.floor(u.sampledAt.getTime() / DAY_MS) * DAY_MS);
    const key = `${u.cluster}\u0000${u.namespace}\u0000${day.getTime()}`;
    const row = perDay.get(key) ?? { cluster: u.cluster, namespace: u.namespace, day, usedGpuSeconds: 0 };
    row.usedGpuSeconds += (u.smPct * u.periodS * weightOf(u)) / 10_000;
    perDay.set(key, row);
  }
  // Keys in a fixed order so concurrent batches lock roll-up rows in the same order.
  return [...perDay.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, row]) => row);
}

function slices<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

type PodRef = { cluster: string; pod_uid: string };
const podsJson = (pods: readonly PodRef[]) => JSON.stringify(pods);

/**
 * Serialises batches that touch the same pods, each pod's lock taken in one order: two reports
 * about one pod cannot both find a period free and both claim it.
 */
async function lockPods(tx: VcudaDb, pods: readonly PodRef[]): Promise<void> {
  // A key that collides only serialises two batches more than needed; NUL is no text for PostgreSQL.
  const keys = pods.map((p) => JSON.stringify([p.cluster, p.pod_uid])).sort();
  await tx.execute(sql`select count(pg_advisory_xact_lock(hashtextextended(k, 31)))::int as n
    from (select k from jsonb_array_elements_text(${JSON.stringify(keys)}::jsonb) k order by k) x`);
}

/**
 * Every allocation of these pods, released ones included: when each container held each card, and
 * each hold's card's quota weight (migration 0020).
 */
async function loadLives(
  tx: VcudaDb,
  pods: readonly PodRef[],
): Promise<{ lives: Map<string, AllocationLife[]>; weights: Map<string, number> }> {
  const rows = rowsOf<{
    cluster: string;
    pod_uid: string;
    container: string;
    card_uuid: string;
    namespace: string;
    from_ms: number;
    to_ms: number | null;
    weight: number;
  }>(
    await tx.execute(sql`
      select a.cluster, a.pod_uid, a.container, a.card_uuid, a.namespace,
        (extract(epoch from a.reserved_at) * 1000)::float8 as from_ms,
        (extract(epoch from a.released_at) * 1000)::float8 as to_ms,
        coalesce(c.quota_weight, 100) as weight
      from allocations a join jsonb_to_recordset(${podsJson(pods)}::jsonb)
        as p(cluster text, pod_uid text) on a.cluster = p.cluster and a.pod_uid = p.pod_uid
      left join cards c on c.uuid = a.card_uuid`),
  );
  const lives = new Map<string, AllocationLife[]>();
  const weights = new Map<string, number>();
  for (const r of rows) {
    const key = holdKey({ cluster: r.cluster, podUid: r.pod_uid, container: r.container, cardUuid: r.card_uuid });
    weights.set(key, Number(r.weight));
    const life = {
      fromMs: Number(r.from_ms),
      toMs: r.to_ms === null ? undefined : Number(r.to_ms),
      namespace: r.namespace,
    };
    lives.set(key, [...(lives.get(key) ?? []), life]);
  }
  return { lives, weights };
}

/** Raw periods already stored for these pods that may touch `[fromMs, toMs)`. */
async function loadStoredPeriods(
  tx: VcudaDb,
  pods: readonly PodRef[],
  fromMs: number,
  toMs: number,
): Promise<Map<string, Period[]>> {
  const rows = rowsOf<{
    cluster: string;
    pod_uid: string;
    container: string;
    card_uuid: string;
    start_ms: number;
    period_s: number;
  }>(
    await tx.execute(sql`
      select s.cluster, s.pod_uid, s.container, s.card_uuid,
        (extract(epoch from s.sampled_at) * 1000)::float8 as start_ms, s.period_s::float8 as period_s
      from usage_samples s join jsonb_to_recordset(${podsJson(pods)}::jsonb)
        as p(cluster text, pod_uid text) on s.cluster = p.cluster and s.pod_uid = p.pod_uid
      where s.resolution = 'raw'
        and s.sampled_at >= ${new Date(fromMs - MAX_RAW_PERIOD_S * 1000).toISOString()}::timestamptz
        and s.sampled_at < ${new Date(toMs).toISOString()}::timestamptz`),
  );
  const stored = new Map<string, Period[]>();
  for (const r of rows) {
    const key = holdKey({ cluster: r.cluster, podUid: r.pod_uid, container: r.container, cardUuid: r.card_uuid });
    const startMs = Math.round(Number(r.start_ms));
    // A real holds a raw period exactly to the millisecond once rounded (MAX_RAW_PERIOD_S).
    const period = { startMs, endMs: startMs + Math.round(Number(r.period_s) * 1000) };
    stored.set(key, [...(stored.get(key) ?? []), period]);
  }
  return stored;
}

/** Inserts rows (new keys only) and adds them to the daily roll-up; returns how many were new. */
async function insertSamples(
  tx: VcudaDb,
  rows: readonly StoredSample[],
  weights: ReadonlyMap<string, number>,
): Promise<number> {
  const stored = new Set<string>();
  for (const slice of slices(rows, USAGE_ROWS_PER_INSERT)) {
    const inserted = await tx
      .insert(usageSamples)
      .values(slice.map((u) => ({ ...u, resolution: 'raw' as const })))
      .onConflictDoNothing({
        target: [
          usageSamples.cluster,
          usageSamples.podUid,
          usageSamples.container,
          usageSamples.cardUuid,
          usageSamples.sampledAt,
        ],
        where: sql`${usageSamples.resolution} = 'raw'`,
      })
      .returning({
        cluster: usageSamples.cluster,
        podUid: usageSamples.podUid,
        container: usageSamples.container,
        cardUuid: usageSamples.cardUuid,
        sampledAt: usageSamples.sampledAt,
      });
    for (const row of inserted) stored.add(sampleKey(row));
  }
  // Only what was new adds to the daily roll-up (a few rows per namespace and day).
  const fresh = rows.filter((u) => stored.has(sampleKey(u)));
  const weightOf = (u: StoredSample) => weights.get(holdKey(u)) ?? 100;
  for (const days of slices(usedPerDay(fresh, weightOf), USAGE_ROWS_PER_INSERT)) {
    await tx
      .insert(usageDays)
      .values(days)
      .onConflictDoUpdate({
        target: [usageDays.cluster, usageDays.namespace, usageDays.day],
        set: { usedGpuSeconds: sql`${usageDays.usedGpuSeconds} + excluded.used_gpu_seconds` },
      });
  }
  return fresh.length;
}

/** The distinct pods of a batch. */
function podsIn(samples: readonly ParsedSample[]): PodRef[] {
  const pods = new Map(
    samples.map((u) => [`${u.cluster}\u0000${u.podUid}`, { cluster: u.cluster, pod_uid: u.podUid }]),
  );
  return [...pods.values()];
}

export function createUsageStore(db: VcudaDb, opts: { clock: () => Date }) {
  return {
    /**
     * Records samples as far as they can be true (usage-bounds.ts): inside the allocation's life,
     * never over time already accounted for. A retried or replayed report therefore counts once,
     * and an overlapping or backdated one adds nothing. The namespace is the allocation's.
     */
    async recordUsage(samples: UsageSample[]): Promise<RecordedUsage> {
      const parsed = z.array(usageSampleSchema).safeParse(samples);
      if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'usage samples');
      const batch = parsed.data;
      if (batch.length === 0) return { recorded: 0, duplicate: 0, outsideAllocation: 0 };
      const offered = batch.map((u) => ({
        key: holdKey(u),
        startMs: u.sampledAt.getTime(),
        endMs: u.sampledAt.getTime() + Math.round(u.periodS * 1000),
        smPct: u.smPct,
        memoryUsedMiB: u.memoryUsedMiB,
      }));
      const pods = podsIn(batch);
      const fromMs = Math.min(...offered.map((o) => o.startMs));
      const toMs = Math.max(...offered.map((o) => o.endMs));
      return db.transaction(async (tx) => {
        await lockPods(tx, pods);
        const { lives, weights } = await loadLives(tx, pods);
        const stored = await loadStoredPeriods(tx, pods, fromMs, toMs);
        const { accepted, verdicts } = acceptSamples(offered, lives, stored, opts.clock().getTime());
        const rows = accepted.map((a): StoredSample => {
          const u = batch[a.offered] as ParsedSample;
          return {
            cluster: u.cluster,
            namespace: a.namespace,
            podUid: u.podUid,
            container: u.container,
            cardUuid: u.cardUuid,
            sampledAt: new Date(a.startMs),
            periodS: (a.endMs - a.startMs) / 1000,
            smPct: a.smPct,
            memoryUsedMiB: a.memoryUsedMiB,
            memoryBurstMiB: u.memoryBurstMiB,
            memoryBurstEvictedMiB: u.memoryBurstEvictedMiB,
            burstEvictedS: u.burstEvicted ? (a.endMs - a.startMs) / 1000 : 0,
            burstEvictions: u.burstEvictions,
          };
        });
        await insertSamples(tx, rows, weights);
        const count = (v: string) => verdicts.filter((x) => x === v).length;
        return {
          recorded: count('accepted'),
          duplicate: count('duplicate'),
          outsideAllocation: count('outside-allocation'),
        };
      });
    },

    /** Rolls old samples up; returns how many rows were merged away at each step. */
    async downsampleUsage(options: DownsampleOptions = {}): Promise<{ raw: number; hourly: number }> {
      const now = opts.clock().getTime();
      return db.transaction(async (tx) => {
        const raw = await rollUp(tx, 'raw', 'hour', new Date(now - (options.rawKeepMs ?? DAY_MS)));
        const hourly = await rollUp(tx, 'hour', 'day', new Date(now - (options.hourlyKeepMs ?? 30 * DAY_MS)));
        return { raw, hourly };
      });
    },
  };
}
