import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../test/support/db/test-databases.js';
import { rowsOf } from './connect.js';
import { createLedger } from './ledger.js';
import { runReport } from './reports.js';
import { createUsageStore } from './usage.js';
import { type AllocationLife, acceptSamples, type OfferedSample, type Period } from './usage-bounds.js';

const DAY_MS = 86_400_000;
const T0 = Date.UTC(2026, 2, 1, 22);

/** Offered samples as a node agent, a retry or an attacker may send them: overlapping, backdated, late. */
const offeredArb = (keys: readonly string[]) =>
  fc.array(
    fc.record({
      key: fc.constantFrom(...keys),
      // Six hours around the allocation, which starts at T0 + 1 h.
      endMs: fc.integer({ min: T0 - 2 * 3_600_000, max: T0 + 4 * 3_600_000 }),
      periodMs: fc.integer({ min: 1, max: 3_600_000 }),
      smPct: fc.integer({ min: 0, max: 10_000 }).map((bp) => bp / 100),
    }),
    { maxLength: 60 },
  );

const livesArb = fc.record({
  fromMs: fc.integer({ min: T0, max: T0 + 2 * 3_600_000 }),
  lengthMs: fc.integer({ min: 1, max: 4 * 3_600_000 }),
  released: fc.boolean(),
});

const toOffered = (o: { key: string; endMs: number; periodMs: number; smPct: number }): OfferedSample => ({
  key: o.key,
  startMs: o.endMs - o.periodMs,
  endMs: o.endMs,
  smPct: o.smPct,
  memoryUsedMiB: 1,
});

describe('acceptSamples', () => {
  it('keeps periods disjoint, inside the allocation and before now, and never across midnight', () => {
    fc.assert(
      fc.property(livesArb, offeredArb(['k1', 'k2']), fc.array(fc.nat(50), { maxLength: 3 }), (life, raw, splits) => {
        const nowMs = T0 + 3 * 3_600_000;
        const lives = new Map<string, AllocationLife[]>([
          [
            'k1',
            [{ fromMs: life.fromMs, toMs: life.released ? life.fromMs + life.lengthMs : undefined, namespace: 'ns' }],
          ],
          ['k2', [{ fromMs: T0, toMs: undefined, namespace: 'ns' }]],
        ]);
        // Some of the stream was stored by earlier batches: what they kept is what later ones see.
        const offered = raw.map(toOffered);
        const stored = new Map<string, Period[]>();
        let from = 0;
        const kept: ReturnType<typeof acceptSamples>['accepted'] = [];
        for (const cut of [...splits.map((n) => Math.min(n, offered.length)).sort((a, b) => a - b), offered.length]) {
          const { accepted } = acceptSamples(offered.slice(from, cut), lives, stored, nowMs);
          for (const a of accepted) stored.set(a.key, [...(stored.get(a.key) ?? []), a]);
          kept.push(...accepted);
          from = Math.max(from, cut);
        }
        for (const [key, periods] of stored) {
          const sorted = [...periods].sort((a, b) => a.startMs - b.startMs);
          const [l] = lives.get(key) ?? [];
          for (const [i, p] of sorted.entries()) {
            expect(p.startMs).toBeLessThan(p.endMs);
            expect(p.startMs).toBeGreaterThanOrEqual(l?.fromMs ?? 0);
            expect(p.endMs).toBeLessThanOrEqual(Math.min(l?.toMs ?? nowMs, nowMs));
            expect(Math.floor(p.startMs / DAY_MS)).toBe(Math.floor((p.endMs - 1) / DAY_MS));
            if (i > 0) expect(p.startMs).toBeGreaterThanOrEqual((sorted[i - 1] as Period).endMs);
          }
        }
        expect(kept.every((a) => a.namespace === 'ns')).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('trims only the overlap of a jittered next period, and counts a repeat as a duplicate', () => {
    const lives = new Map([['k', [{ fromMs: 0, toMs: undefined, namespace: 'ns' }]]]);
    const s = (startMs: number, endMs: number) => ({ key: 'k', startMs, endMs, smPct: 50, memoryUsedMiB: 1 });
    const { accepted, verdicts } = acceptSamples(
      [s(10_000, 20_000), s(19_990, 29_990), s(10_000, 20_000), s(25_000, 26_000)],
      lives,
      new Map(),
      DAY_MS,
    );
    expect(verdicts).toEqual(['accepted', 'accepted', 'duplicate', 'duplicate']);
    expect(accepted.map((a) => [a.startMs, a.endMs])).toEqual([
      [10_000, 20_000],
      [20_000, 29_990],
    ]);
  });
});

describe('usage reports never exceed what was allocated, times the burst a soft limit allows', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('pglite');
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('holds over random sample streams, overlapping and backdated ones included', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 0, max: 99 }),
        livesArb,
        offeredArb(['main']),
        async (core, extra, life, raw) => {
          const limit = Math.min(100, core + extra);
          const cluster = `c${run++}`;
          let nowMs = life.fromMs;
          const clock = () => new Date(nowMs);
          const ledger = createLedger(t.db, { clock });
          await ledger.upsertNode(cluster, 'n1', [
            { uuid: `${cluster}-GPU`, index: 0, model: 'A100', memoryMiB: 1024 },
          ]);
          const items = [{ container: 'main', cardUuid: `${cluster}-GPU`, core, memoryMiB: 1 }];
          await ledger.reserve({ cluster, podUid: 'p', namespace: 'ns', pod: 'p', node: 'n1', items });
          if (life.released) {
            nowMs = life.fromMs + life.lengthMs;
            await ledger.release(cluster, 'p');
          }
          nowMs = T0 + 3 * 3_600_000;
          const usage = createUsageStore(t.db, { clock });
          // What the usage route passes on: the share capped at the container's core limit.
          const samples = raw.map((o) => ({
            cluster,
            namespace: 'ns',
            podUid: 'p',
            container: o.key,
            cardUuid: `${cluster}-GPU`,
            sampledAt: new Date(o.endMs - o.periodMs),
            periodS: o.periodMs / 1000,
            smPct: Math.min(o.smPct, limit),
            memoryUsedMiB: 1,
          }));
          for (let i = 0; i < samples.length; i += 7) await usage.recordUsage(samples.slice(i, i + 7));
          const window = { since: new Date(T0 - DAY_MS), until: new Date(T0 + DAY_MS), cluster };
          const report = await runReport(t.db, 'gpu-hours', window, clock);
          const raw_ = rowsOf<{ used: number }>(
            await t.db.execute(sql`select coalesce(sum(sm_pct::float8 * period_s::float8), 0) / 360000 as used
              from usage_samples where cluster = ${cluster}`),
          );
          const allocated = report.rows.reduce((sum, r) => sum + Number(r.allocatedGpuHours), 0);
          const used = report.rows.reduce((sum, r) => sum + Number(r.usedGpuHours), 0);
          // Per day too: a day's usage never holds seconds of another day's allocation.
          for (const r of report.rows) {
            expect(Number(r.usedGpuHours)).toBeLessThanOrEqual((Number(r.allocatedGpuHours) * limit) / core + 0.01);
          }
          expect(used).toBeLessThanOrEqual((allocated * limit) / core + 0.01);
          // Exactly, from the samples: the allocation's own span, and a real's rounding (7 digits) as slack.
          const heldMs = (life.released ? life.fromMs + life.lengthMs : nowMs) - life.fromMs;
          const allowed = (((core / 100) * heldMs) / 3_600_000) * (limit / core);
          expect(Number(raw_[0]?.used)).toBeLessThanOrEqual(allowed * (1 + 1e-6) + 1e-12);
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);
});
