/**
 * A tenant that writes its own in-process counter back to 0, on the fake GPU end to end: the
 * node agent's default sensor reads the counters libvcuda keeps in each region, and the region is
 * the tenant's to write, so a tenant reading itself idle teaches its limiter that it runs nothing
 * and runs far past its limit. The counter guard (node-agent/card-sampling/counter-guard.ts) holds
 * the counters to NVML's device utilization and, once they fall short, measures the card from
 * NVML's per-process figures, which the tenant cannot write. Ground truth is the fake driver's own
 * accounting. The guard's windows are shortened here (1 s, two in a row) to fit a test.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runScenario, type ScenarioResult } from './fake-card.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const TENANT = { name: 't', request: 30, limit: 30, path: 'storm', grid: 264 };

function meanShare(result: ScenarioResult, fromMs: number, toMs: number): number {
  const series = (result.shares.get('t') ?? []).slice(
    Math.round(fromMs / result.periodMs),
    Math.round(toMs / result.periodMs),
  );
  return series.reduce((a, b) => a + b, 0) / Math.max(1, series.length);
}

describe('a tenant writing its own in-process counter', () => {
  it('runs far past its limit while the counters are trusted', async () => {
    const result = await runScenario(root, {
      sms: 132,
      seconds: 8,
      tenants: [TENANT],
      // Observed, never tripped: what the attack gets without the guard.
      tamper: { tenant: 't', guard: { windowMs: 1000, windows: Number.MAX_SAFE_INTEGER } },
    });
    expect(result.distrustedAtMs).toBeUndefined();
    // Judged over the last 4 s: the limiter starts the tenant low, and a 3..6 s window of a 6 s
    // run read under 50 once, with 21 test files busy on two cores.
    const taken = meanShare(result, 4000, 8000);
    expect(taken, `${taken.toFixed(1)} % for a hard 30 % over 4..8 s`).toBeGreaterThan(50);
  }, 60_000);

  it('is held to its limit once the guard measures the card from NVML', async () => {
    const result = await runScenario(root, {
      sms: 132,
      seconds: 14,
      tenants: [TENANT],
      tamper: { tenant: 't', guard: { windowMs: 1000, windows: 2 } },
    });
    // The attack takes the card until two windows have read it (about 5 s in on this fake: the
    // limiter starts the tenant low), then NVML's figures steer its limiter back within a second.
    // Judged from 2 s after the guard said it tripped, which on two cores busy with the rest of
    // the suite came up to 3 s late: at least 3 s of the scenario must be left to judge.
    const tripped = result.distrustedAtMs;
    expect(tripped, 'the guard never distrusted the counters').toBeDefined();
    const from = (tripped as number) + 2000;
    expect(from, `tripped at ${tripped} ms: too late to judge`).toBeLessThanOrEqual(11_000);
    const held = meanShare(result, from, 14_000);
    expect(held, `${held.toFixed(1)} % for a hard 30 % from ${from} ms`).toBeLessThanOrEqual(34);
    expect(held).toBeGreaterThanOrEqual(23);
  }, 60_000);
});
