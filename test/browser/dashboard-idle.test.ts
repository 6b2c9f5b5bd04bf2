/**
 * The idle table in a real browser: every idle allocation reachable page by page (25 rows, 10 a
 * page: never cut), column headings that say what they measure, and the threshold the page and
 * `vcuda report idle --url` share written above the table.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../control-plane/app.js';
import { dashboardRoutes } from '../../control-plane/dashboard/routes.js';
import type { DashboardSource, IdleAllocation } from '../../control-plane/dashboard/source.js';
import { hasChromium, launchChromium, openDashboard } from './chromium.js';

const runs = hasChromium() || Boolean(process.env.CI);

const idle: IdleAllocation[] = Array.from({ length: 25 }, (_, i) => ({
  cluster: 'local',
  namespace: 'notebooks',
  pod: `nb-${String(i).padStart(2, '0')}`,
  node: 'gpu-node-0',
  cardUuid: 'GPU-00000000-0000-0000-0000-000000000000',
  core: 10,
  memoryMiB: 1024,
  // nb-24 held longest: it comes first.
  heldMs: (i + 3) * 60_000,
  utilizationPct: 0.5,
}));

const source: DashboardSource = {
  readClusters: async () => [],
  readClusterNames: async () => ['local'],
  readQuotas: async () => [],
  readReports: async () => ({ gpuHours: [], idle, idleCriteria: { forMinutes: 2, belowPct: 5 } }),
  readRefusals: async () => [],
};

describe.skipIf(!runs)('the idle table in headless chromium', () => {
  let browser: Browser;
  let page: Page;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const app = createApp({ dashboard: dashboardRoutes({ source, clock: () => new Date(), cacheMs: 100 }) });
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
    browser = await launchChromium();
    page = await openDashboard(browser, `http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await close?.();
  });

  const podsShown = () => page.locator('[data-testid=idle-row] td:first-child').allTextContents();

  it('pages through all 25 idle allocations, longest held first', async () => {
    expect(await podsShown()).toEqual(Array.from({ length: 10 }, (_, i) => `local/notebooks/nb-${24 - i}`));
    expect(await page.locator('[data-testid=idle-range]').textContent()).toBe('1–10 of 25');
    const seen = new Set(await podsShown());
    await page.locator('[data-testid=idle-next]').click();
    expect(await page.locator('[data-testid=idle-range]').textContent()).toBe('11–20 of 25');
    for (const p of await podsShown()) seen.add(p);
    await page.locator('[data-testid=idle-next]').click();
    expect(await page.locator('[data-testid=idle-range]').textContent()).toBe('21–25 of 25');
    expect(await page.locator('[data-testid=idle-next]').isDisabled()).toBe(true);
    for (const p of await podsShown()) seen.add(p);
    expect(seen.size).toBe(25);
    await page.locator('[data-testid=idle-prev]').click();
    expect(await page.locator('[data-testid=idle-range]').textContent()).toBe('11–20 of 25');
  });

  it('says what each column measures and which threshold makes an allocation idle', async () => {
    const heads = await page.locator('#idle th').allTextContents();
    expect(heads).toEqual(['pod', 'node / card', 'share promised', 'held for', 'pod SM use, measured']);
    expect(await page.locator('#idle th', { hasText: 'pod SM use' }).getAttribute('title')).toMatch(
      /the pod's own mean share of the card's compute/,
    );
    expect(await page.locator('[data-testid=idle-criteria]').textContent()).toBe(
      "Held at least 2 min with the pod's mean measured SM use below 5 %: the same threshold vcuda report idle --url uses.",
    );
  });
});
