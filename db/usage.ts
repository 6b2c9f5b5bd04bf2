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

export function createUsageStore(db: VcudaDb, opts: { clock: () => Date }) {
  return {
    async recordUsage(samples: UsageSample[]): Promise<void> {
      const parsed = z.array(usageSampleSchema).safeParse(samples);
      if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'usage samples');
      if (parsed.data.length === 0) return;
      // GPU-seconds used per (cluster, namespace, UTC day of the sample) for the daily roll-up.
      const perDay = new Map<string, { cluster: string; namespace: string; day: Date; usedGpuSeconds: number }>();
      for (const u of parsed.data) {
        const day = new Date(Math.floor(u.sampledAt.getTime() / DAY_MS) * DAY_MS);
        const key = `${u.cluster}\u0000${u.namespace}\u0000${day.getTime()}`;
        const row = perDay.get(key) ?? { cluster: u.cluster, namespace: u.namespace, day, usedGpuSeconds: 0 };
        row.usedGpuSeconds += (u.smPct * u.periodS) / 100;
        perDay.set(key, row);
      }
      // Keys in a fixed order so concurrent batches lock roll-up rows in the same order.
      const days = [...perDay.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, row]) => row);
      await db.transaction(async (tx) => {
        await tx.insert(usageSamples).values(parsed.data.map((u) => ({ ...u, resolution: 'raw' as const })));
        await tx
          .insert(usageDays)
          .values(days)
          .onConflictDoUpdate({
            target: [usageDays.cluster, usageDays.namespace, usageDays.day],
            set: { usedGpuSeconds: sql`${usageDays.usedGpuSeconds} + excluded.used_gpu_seconds` },
          });
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
