/**
 * Usage samples from node agents and their downsampling. Raw samples older than a day become
 * one row per container, card and hour; hourly rows older than a month become one per day.
 * A roll-up keeps the time covered (`period_s` summed) and the time-weighted mean SM share, so
 * GPU-hours used (`sm_pct / 100 * period_s / 3600`) are the same before and after.
 */
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../contract/index.js';
import { rowsOf, type VcudaDb } from './connect.js';
import { usageDays, usageSamples } from './schema.js';

const name = z.string().min(1).max(253);
export const usageSampleSchema = z.object({
  cluster: name,
  namespace: name,
  podUid: name,
  container: name,
  cardUuid: name,
  sampledAt: z.date(),
  periodS: z.number().positive().max(86_400),
  smPct: z.number().min(0).max(100),
  memoryUsedMiB: z.number().int().min(0),
});
export type UsageSample = z.infer<typeof usageSampleSchema>;

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
        (cluster, namespace, pod_uid, container, card_uuid, sampled_at, period_s, sm_pct, memory_used_mib, resolution, samples)
      select cluster, namespace, pod_uid, container, card_uuid,
        date_trunc(${to}, sampled_at at time zone 'UTC') at time zone 'UTC',
        sum(period_s), coalesce(sum(sm_pct * period_s) / nullif(sum(period_s), 0), 0),
        max(memory_used_mib), ${to}, sum(samples)
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
  `${u.cluster}\u0000${u.podUid}\u0000${u.container}\u0000${u.cardUuid}\u0000${u.sampledAt.getTime()}`;

/** GPU-seconds used per (cluster, namespace, UTC day of the sample), in a fixed (lock) order. */
function usedPerDay(samples: readonly UsageSample[]) {
  const perDay = new Map<string, { cluster: string; namespace: string; day: Date; usedGpuSeconds: number }>();
  for (const u of samples) {
    const day = new Date(Math.floor(u.sampledAt.getTime() / DAY_MS) * DAY_MS);
    const key = `${u.cluster}\u0000${u.namespace}\u0000${day.getTime()}`;
    const row = perDay.get(key) ?? { cluster: u.cluster, namespace: u.namespace, day, usedGpuSeconds: 0 };
    row.usedGpuSeconds += (u.smPct * u.periodS) / 100;
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

export function createUsageStore(db: VcudaDb, opts: { clock: () => Date }) {
  return {
    /**
     * Records raw samples; one already stored (same cluster, pod, container, card and time) is
     * skipped, so a retried or replayed report counts once. Returns how many were new.
     */
    async recordUsage(samples: UsageSample[]): Promise<{ recorded: number }> {
      const parsed = z.array(usageSampleSchema).safeParse(samples);
      if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'usage samples');
      if (parsed.data.length === 0) return { recorded: 0 };
      // One row per key, in key order: batches racing on the same samples wait on each other's
      // unique-index entries in the same order, so they cannot deadlock.
      const unique = [...new Map(parsed.data.map((u) => [sampleKey(u), u])).entries()]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([, u]) => u);
      return db.transaction(async (tx) => {
        const stored = new Set<string>();
        for (const slice of slices(unique, USAGE_ROWS_PER_INSERT)) {
          const rows = await tx
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
          for (const row of rows) stored.add(sampleKey(row));
        }
        // Only what was new adds to the daily roll-up (a few rows per namespace and day).
        const fresh = unique.filter((u) => stored.has(sampleKey(u)));
        for (const days of slices(usedPerDay(fresh), USAGE_ROWS_PER_INSERT)) {
          await tx
            .insert(usageDays)
            .values(days)
            .onConflictDoUpdate({
              target: [usageDays.cluster, usageDays.namespace, usageDays.day],
              set: { usedGpuSeconds: sql`${usageDays.usedGpuSeconds} + excluded.used_gpu_seconds` },
            });
        }
        return { recorded: fresh.length };
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
