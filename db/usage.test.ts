import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../test/support/db/test-databases.js';
import { rowsOf, type VcudaDb } from './connect.js';
import { createLedger } from './ledger.js';
import { MIGRATIONS_FOLDER, migrate } from './migrate.js';
import { runReport } from './reports.js';
import type { UsageSample } from './usage.js';

const kinds = await testDbKinds();

describe.each(kinds)('usage samples on %s', (kind) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await t?.drop();
  });

  async function countByResolution() {
    return Object.fromEntries(
      rowsOf<{ resolution: string; n: number }>(
        await t.db.execute(sql`select resolution, count(*)::int as n from usage_samples group by 1 order by 1`),
      ).map((r) => [r.resolution, r.n]),
    );
  }

  it('downsamples raw -> hourly -> daily and keeps GPU-hours used unchanged', async () => {
    let now = new Date('2026-02-28T00:00:00Z');
    const ledger = createLedger(t.db, { clock: () => now });
    // Usage counts only while an allocation holds the card: p1 holds GPU-a from the day before.
    await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_960 }]);
    const items = ['a', 'b'].map((container) => ({ container, cardUuid: 'GPU-a', core: 50, memoryMiB: 1024 }));
    await ledger.reserve({ cluster: 'c1', podUid: 'p1', namespace: 'ml', pod: 'p1', node: 'n1', items });
    now = new Date('2026-03-10T00:00:00Z');
    // 3 hours of 60 s samples on 2026-03-01 (00:00..03:00), two containers; SM 0..90 %.
    const samples = [];
    for (let i = 0; i < 180; i++) {
      for (const container of ['a', 'b']) {
        samples.push({
          cluster: 'c1',
          namespace: 'ml',
          podUid: 'p1',
          container,
          cardUuid: 'GPU-a',
          sampledAt: new Date(Date.UTC(2026, 2, 1, 0, i)),
          periodS: 60,
          smPct: container === 'a' ? (i % 10) * 10 : 50,
          memoryUsedMiB: 100 + i,
          // a bursts i MiB, 10 of them on the host every other minute; b never bursts.
          ...(container === 'a'
            ? { memoryBurstMiB: i, memoryBurstEvictedMiB: i % 2 ? 0 : 10, burstEvicted: i % 2 === 0, burstEvictions: i }
            : {}),
        });
      }
    }
    // A recent sample, younger than a day: it must stay raw.
    samples.push({ ...(samples[0] as (typeof samples)[number]), sampledAt: new Date('2026-03-09T12:00:00Z') });
    await ledger.recordUsage(samples);
    const window = { since: '2026-03-01', until: '2026-03-10', groupBy: 'cluster' as const };
    const before = await runReport(t.db, 'gpu-hours', window, () => now);
    const burstBefore = await runReport(t.db, 'burst', { ...window, groupBy: 'pod' }, () => now);
    // a peaks at 179 MiB; 90 minutes with some on the host (and the 03-09 copy of minute 0: 60 s more).
    expect(burstBefore.rows).toEqual([
      {
        cluster: 'c1',
        namespace: 'ml',
        team: '',
        pod: 'p1',
        peakBurstMiB: 179,
        peakEvictedMiB: 10,
        evictedSeconds: 5460,
      },
    ]);
    // 2026-03-01: a at a mean 45 % x 3 h = 1.35, b at 50 % x 3 h = 1.5; 2026-03-09: one minute at 0 %.
    expect(before.rows.filter((r) => r.usedGpuHours !== 0).map((r) => [r.day, r.usedGpuHours])).toEqual([
      ['2026-03-01', 2.85],
    ]);

    // GPU-seconds used, straight from the samples (the reports read whole days from usage_days).
    const usedSeconds = async () =>
      rowsOf<{ s: number }>(
        await t.db.execute(sql`select round(sum(sm_pct * period_s)::numeric / 100, 3)::float8 as s from usage_samples`),
      )[0]?.s;
    expect(await usedSeconds()).toBe(2.85 * 3600);
    expect(await ledger.downsampleUsage()).toEqual({ raw: 360, hourly: 0 });
    expect(await countByResolution()).toEqual({ hour: 6, raw: 1 });
    const hourly = rowsOf<{ period_s: number; samples: number; memory_used_mib: number }>(
      await t.db.execute(sql`select period_s, samples, memory_used_mib from usage_samples
        where resolution = 'hour' and container = 'a' order by sampled_at limit 1`),
    );
    expect(hourly).toEqual([{ period_s: 3600, samples: 60, memory_used_mib: 159 }]); // peak kept
    expect((await runReport(t.db, 'gpu-hours', window, () => now)).rows).toEqual(before.rows);
    // Bursts: peaks and the latest eviction count kept, evicted seconds summed.
    const burstHour = rowsOf<{ mib: number; evicted: number; s: number; n: number }>(
      await t.db.execute(sql`select memory_burst_mib as mib, memory_burst_evicted_mib as evicted,
        burst_evicted_s::float8 as s, burst_evictions as n from usage_samples
        where resolution = 'hour' and container = 'a' order by sampled_at limit 1`),
    );
    expect(burstHour).toEqual([{ mib: 59, evicted: 10, s: 1800, n: 59 }]);
    expect((await runReport(t.db, 'burst', { ...window, groupBy: 'pod' }, () => now)).rows).toEqual(burstBefore.rows);
    expect(await usedSeconds()).toBe(2.85 * 3600);

    now = new Date('2026-04-15T00:00:00Z'); // hourly rows are now older than 30 days
    expect(await ledger.downsampleUsage()).toEqual({ raw: 1, hourly: 7 }); // the 03-09 row goes through both steps
    expect(await countByResolution()).toEqual({ day: 3 });
    expect(await usedSeconds()).toBe(2.85 * 3600);
    expect((await runReport(t.db, 'gpu-hours', window, () => now)).rows).toEqual(before.rows);
    expect((await runReport(t.db, 'burst', { ...window, groupBy: 'pod' }, () => now)).rows).toEqual(burstBefore.rows);
  });

  it('rejects a sample with the field named', async () => {
    const ledger = createLedger(t.db, { clock: () => new Date() });
    const bad = {
      cluster: 'c1',
      namespace: 'ml',
      podUid: 'p1',
      container: 'a',
      cardUuid: 'GPU-a',
      sampledAt: new Date(),
      periodS: 10,
      smPct: 140,
      memoryUsedMiB: 1,
    };
    await expect(ledger.recordUsage([bad])).rejects.toMatchObject({
      code: 'invalid',
      message: expect.stringMatching(/\[0\]\.smPct/),
    });
  });
});

const DAY = new Date('2026-03-05T00:00:00Z');
const at = (minute: number) => new Date(DAY.getTime() + minute * 60_000);
const usedSeconds = async (db: VcudaDb) =>
  rowsOf<{ s: number }>(
    await db.execute(sql`select coalesce(sum(used_gpu_seconds), 0)::float8 as s from usage_days`),
  )[0]?.s;

describe.each(kinds)('recording usage on %s', (kind) => {
  let t: TestDatabase;
  afterAll(async () => {
    await t?.drop();
  });

  // 25 pods hold 4 cards each from an hour before DAY; sample i is pod i % 25, card (i / 25) % 4,
  // over the i / 100-th 10 s period of DAY.
  const pods = Array.from({ length: 25 }, (_, p) => `pod-${p}`);
  const sampleOf = (i: number, over: Partial<UsageSample> = {}): UsageSample => ({
    cluster: 'c1',
    namespace: `ns-${(i % 25) % 7}`,
    podUid: pods[i % 25] as string,
    container: 'main',
    cardUuid: `GPU-${Math.floor(i / 25) % 4}`,
    sampledAt: new Date(DAY.getTime() + Math.floor(i / 100) * 10_000),
    periodS: 10,
    smPct: 50,
    memoryUsedMiB: 100,
    ...over,
  });
  let now = new Date(DAY.getTime() - 3_600_000);
  const clock = () => now;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    const ledger = createLedger(t.db, { clock });
    const cards = [0, 1, 2, 3].map((i) => ({ uuid: `GPU-${i}`, index: i, model: 'A100', memoryMiB: 40_960 }));
    await ledger.upsertNode('c1', 'n1', cards);
    for (const [p, podUid] of [...pods, 'replayed'].entries()) {
      const items = cards.map((c) => ({ container: 'main', cardUuid: c.uuid, core: 1, memoryMiB: 1 }));
      await ledger.reserve({ cluster: 'c1', podUid, namespace: `ns-${p % 7}`, pod: podUid, node: 'n1', items });
    }
    now = new Date(DAY.getTime() + 3_600_000);
  });

  it('writes a batch of 10,000 samples (past the 65,535 bind parameters of one statement) at once', async () => {
    const ledger = createLedger(t.db, { clock });
    const batch = Array.from({ length: 10_000 }, (_, i) => sampleOf(i));
    expect(await ledger.recordUsage(batch)).toEqual({ recorded: 10_000, duplicate: 0, outsideAllocation: 0 });
    const n = rowsOf<{ n: number }>(await t.db.execute(sql`select count(*)::int as n from usage_samples`))[0]?.n;
    expect(n).toBe(10_000);
    // 10,000 x 10 s x 50 %.
    expect(await usedSeconds(t.db)).toBe(50_000);
    // The same batch again adds nothing.
    expect(await ledger.recordUsage(batch)).toMatchObject({ recorded: 0, duplicate: 10_000 });
    expect(await usedSeconds(t.db)).toBe(50_000);
  });

  it('counts a sample once whether it comes twice in a batch or in batches racing each other', async () => {
    const ledger = createLedger(t.db, { clock });
    const before = await usedSeconds(t.db);
    const one = sampleOf(0, { podUid: 'replayed', sampledAt: at(5) });
    expect(await ledger.recordUsage([one, { ...one }])).toEqual({ recorded: 1, duplicate: 1, outsideAllocation: 0 });
    const racing = await Promise.all([1, 2, 3, 4].map(() => ledger.recordUsage([{ ...one, sampledAt: at(6) }])));
    expect(racing.map((r) => r.recorded).sort()).toEqual([0, 0, 0, 1]);
    expect(((await usedSeconds(t.db)) ?? 0) - (before ?? 0)).toBe(10);
  });
});

/** The migrations folder as it was before `upTo` (exclusive): a ledger written by an older release. */
function migrationsBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-migrations-'));
  cpSync(MIGRATIONS_FOLDER, dir, { recursive: true });
  const journalPath = join(dir, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: { tag: string }[] };
  journal.entries = journal.entries.slice(
    0,
    journal.entries.findIndex((e) => e.tag === tag),
  );
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}

describe.each(kinds)('migration 0009 on %s', (kind) => {
  it('removes copies of a raw sample stored before, and what they added to the daily roll-up', async () => {
    const t = await createTestDatabase(kind);
    const older = migrationsBefore('0009_usage_samples_once');
    try {
      // A ledger at 0008: drop what the fresh database got, then migrate it up to 0008 only.
      await t.db.execute(sql`drop schema public cascade`);
      await t.db.execute(sql`drop schema drizzle cascade`);
      await t.db.execute(sql`create schema public`);
      expect(await migrate(t.db, older)).toEqual({ applied: 9, total: 9 });
      // What 0008 stored for the same sample posted 3 times and another once: the roll-up counted all four.
      for (const [minute, pct] of [
        [1, 40],
        [1, 40],
        [1, 40],
        [2, 20],
      ] as const) {
        await t.db.execute(sql`insert into usage_samples
          (cluster, namespace, pod_uid, container, card_uuid, sampled_at, period_s, sm_pct, memory_used_mib, resolution)
          values ('c1', 'ml', 'p', 'c', 'GPU-1', ${at(minute).toISOString()}, 10, ${pct}, 1, 'raw')`);
      }
      // Rolled-up rows at the same time are not copies of a raw sample: they stay.
      await t.db.execute(sql`insert into usage_samples
        (cluster, namespace, pod_uid, container, card_uuid, sampled_at, period_s, sm_pct, memory_used_mib, resolution)
        values ('c1', 'ml', 'p', 'c', 'GPU-1', ${at(1).toISOString()}, 3600, 10, 1, 'hour')`);
      await t.db.execute(sql`insert into usage_days values ('c1', 'ml', ${DAY.toISOString()}, 14)`);

      // Every migration from 0009 on, however many later ones there are.
      const upgraded = await migrate(t.db);
      expect(upgraded.applied).toBe(upgraded.total - 9);
      const rows = rowsOf<{ resolution: string; n: number }>(
        await t.db.execute(sql`select resolution, count(*)::int as n from usage_samples group by 1 order by 1`),
      );
      expect(rows).toEqual([
        { resolution: 'hour', n: 1 },
        { resolution: 'raw', n: 2 },
      ]);
      expect(await usedSeconds(t.db)).toBe(6);
      const ledger = createLedger(t.db, { clock: () => DAY });
      const again = { cluster: 'c1', namespace: 'ml', podUid: 'p', container: 'c', cardUuid: 'GPU-1', periodS: 10 };
      expect(await ledger.recordUsage([{ ...again, sampledAt: at(1), smPct: 40, memoryUsedMiB: 1 }])).toMatchObject({
        recorded: 0,
      });
    } finally {
      rmSync(older, { recursive: true, force: true });
      await t.drop();
    }
  });
});
