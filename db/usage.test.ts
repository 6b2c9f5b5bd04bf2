import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from './connect.js';
import { createLedger } from './ledger.js';
import { runReport } from './reports.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from './test-databases.js';

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
    let now = new Date('2026-03-10T00:00:00Z');
    const ledger = createLedger(t.db, { clock: () => now });
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
        });
      }
    }
    // A recent sample, younger than a day: it must stay raw.
    samples.push({ ...(samples[0] as (typeof samples)[number]), sampledAt: new Date('2026-03-09T12:00:00Z') });
    await ledger.recordUsage(samples);
    const window = { since: '2026-03-01', until: '2026-03-10', groupBy: 'cluster' as const };
    const before = await runReport(t.db, 'gpu-hours', window, () => now);
    // 2026-03-01: a at a mean 45 % x 3 h = 1.35, b at 50 % x 3 h = 1.5; 2026-03-09: one minute at 0 %.
    expect(before.rows.map((r) => r.usedGpuHours)).toEqual([2.85, 0]);

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
    expect(await usedSeconds()).toBe(2.85 * 3600);

    now = new Date('2026-04-15T00:00:00Z'); // hourly rows are now older than 30 days
    expect(await ledger.downsampleUsage()).toEqual({ raw: 1, hourly: 7 }); // the 03-09 row goes through both steps
    expect(await countByResolution()).toEqual({ day: 3 });
    expect(await usedSeconds()).toBe(2.85 * 3600);
    expect((await runReport(t.db, 'gpu-hours', window, () => now)).rows).toEqual(before.rows);
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
