/**
 * Compute limits where NVML has no per-process utilization (MIG): the fake NVML answers
 * NOT_SUPPORTED for it (FAKEGPU_NVML_PROCESS_UTIL=0), so the card sampler chooses the in-process
 * sensor (libvcuda's busy-ns counters in the regions, native/COMPUTE.md "The in-process sensor")
 * and the limiters steer by it; ground truth is the fake driver's own accounting. Same bounds as
 * compute-limit.test.ts (a mean once settled may run OVER points past its target or fall UNDER
 * short of it), over 3 s rather than 1.5: a process that got no CPU for a while folds its completed
 * samples in late, so on a loaded machine (load 14-15 on 2 cores) a starved second cost this sensor
 * more than NVML's (one 1.5 s mean in four fell 7-8 points short, where the NVML test's did not).
 * The last case runs in a shared MIG instance, where nothing is switched off: NVML has none there.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runScenario, type ScenarioResult } from './fake-card.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const OVER = 4;
const UNDER = 7;

function meanShare(result: ScenarioResult, tenant: string, fromMs: number, toMs: number): number {
  const series = (result.shares.get(tenant) ?? []).slice(
    Math.round(fromMs / result.periodMs),
    Math.round(toMs / result.periodMs),
  );
  return series.reduce((a, b) => a + b, 0) / Math.max(1, series.length);
}

function expectNear(share: number, target: number, what: string): void {
  expect(share - target, `${what}: ${share.toFixed(1)} % for ${target} %`).toBeLessThanOrEqual(OVER);
  expect(target - share, `${what}: ${share.toFixed(1)} % for ${target} %`).toBeLessThanOrEqual(UNDER);
}

describe('compute limits with the in-process sensor (no per-process utilization from NVML)', () => {
  it('holds a lone hard tenant at its limit', async () => {
    const result = await runScenario(root, {
      sms: 132,
      seconds: 5,
      sensor: 'in-process',
      tenants: [{ name: 't', request: 50, limit: 50, path: 'storm', grid: 264 }],
    });
    expectNear(meanShare(result, 't', 2000, 5000), 50, 'lone hard 50');
  }, 60_000);

  it('splits a card between two hard tenants whose kernels interleave', async () => {
    const result = await runScenario(root, {
      sms: 16,
      seconds: 5,
      sensor: 'in-process',
      tenants: [
        { name: 'a', request: 30, limit: 30, path: 'storm', grid: 264 },
        { name: 'b', request: 70, limit: 70, path: 'storm', grid: 528 },
      ],
    });
    // Spans of each stream's work would read the neighbour's kernels as its own: both tenants would
    // see most of the card and hold themselves far below their limits.
    expectNear(meanShare(result, 'a', 2000, 5000), 30, 'hard 30 beside hard 70');
    expectNear(meanShare(result, 'b', 2000, 5000), 70, 'hard 70 beside hard 30');
  }, 60_000);

  it('splits a shared MIG instance between two hard tenants given it by its MIG- UUID', async () => {
    // A 3g.40gb (60 SMs) on the H100 in MIG mode: the sampler finds no per-process utilization on
    // the card by itself (the ready line is checked), the limit files name the instance, and the
    // ground truth is the instance's own accounting, not the card's.
    const result = await runScenario(root, {
      sms: 132,
      seconds: 5,
      mig: { profileId: 9 },
      tenants: [
        { name: 'a', request: 30, limit: 30, path: 'storm', grid: 264 },
        { name: 'b', request: 70, limit: 70, path: 'storm', grid: 528 },
      ],
    });
    expectNear(meanShare(result, 'a', 2000, 5000), 30, 'hard 30 beside hard 70 in a 3g.40gb');
    expectNear(meanShare(result, 'b', 2000, 5000), 70, 'hard 70 beside hard 30 in a 3g.40gb');
  }, 60_000);
});
