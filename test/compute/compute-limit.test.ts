/**
 * Regression test for compute limits, end to end on the fake GPU: tenant processes under the
 * libvcuda preload, the node agent's card sampler feeding their regions, the fake driver's own
 * accounting as ground truth. Bounds are loose (±10 points over a second or more) so a broken
 * controller fails while a loaded CI machine does not; precision lives in `npm run bench -- compute`.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runScenario, type ScenarioResult } from './fake-card.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Mean share (percent) of a tenant between two times after its start. */
function meanShare(result: ScenarioResult, tenant: string, fromMs: number, toMs: number): number {
  const series = (result.shares.get(tenant) ?? []).slice(
    Math.round(fromMs / result.periodMs),
    Math.round(toMs / result.periodMs),
  );
  return series.reduce((a, b) => a + b, 0) / Math.max(1, series.length);
}

describe('compute limits on the fake GPU', () => {
  it('limits every submission path, each tenant to its own hard limit', async () => {
    const paths = ['storm', 'ex', 'coop', 'graph', 'getproc', 'sync'] as const;
    const grid = { storm: 264, ex: 264, coop: 132, graph: 264, getproc: 264, sync: 13_200 } as const;
    const result = await runScenario(root, {
      sms: 132,
      seconds: 3,
      tenants: paths.map((path) => ({ name: path, request: 12, limit: 12, path, grid: grid[path] })),
    });
    // Six tenants take 72 % together: a path that escapes the limiter takes the idle 28 % and
    // shows in the card's total even when fair time-slicing keeps each share near its target.
    const shares = paths.map((path) => meanShare(result, path, 1500, 3000));
    const report = paths.map((p, i) => `${p} ${shares[i]?.toFixed(1)} %`).join(', ');
    for (const share of shares) expect(Math.abs(share - 12), report).toBeLessThanOrEqual(10);
    expect(
      shares.reduce((a, b) => a + b, 0),
      report,
    ).toBeLessThanOrEqual(72 + 10);
  }, 60_000);

  it('applies a live limit change to a running tenant without a restart', async () => {
    const result = await runScenario(root, {
      sms: 16,
      seconds: 3.5,
      tenants: [{ name: 'live', request: 70, limit: 70, path: 'storm', grid: 64 }],
      changes: [{ atMs: 1500, tenant: 'live', change: { coreLimit: 20 } }],
    });
    const before = meanShare(result, 'live', 700, 1500);
    const after = meanShare(result, 'live', 2500, 3500);
    expect(Math.abs(before - 70), `before the change: ${before.toFixed(1)} %`).toBeLessThanOrEqual(10);
    expect(Math.abs(after - 20), `after the change: ${after.toFixed(1)} %`).toBeLessThanOrEqual(10);
  }, 60_000);
});
