/**
 * The dashboard of `vcuda local` never looks healthy when it is not, and fits the screen it is on:
 * a node whose agent is stopped turns unhealthy (its header, its cards, the header's node count)
 * within its heartbeat limit, and so does the terminal summary; at 1400 and 420 px wide nothing
 * overflows the page sideways (wide tables scroll inside their own box), and a heading reached
 * from the navigation lands below the sticky header. Short heartbeat settings: 1 s period, 5 s limit.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { formatSummary, readSummary } from '../../sim/local-summary.js';
import { inThisProcess } from '../../sim/node/local-node.js';
import { hasChromium, launchChromium, openDashboard } from './chromium.js';
import { twoNodeCluster as cluster, gpuPod } from './local-cluster-fixture.js';

const runs = hasChromium() || Boolean(process.env.CI);
const HEARTBEAT = { periodMs: 1_000, staleSeconds: 5 };

/** How far the page reaches past the viewport sideways (0: it fits). */
function horizontalOverflow(page: Page): Promise<number> {
  return page.evaluate(() => {
    const root = (
      globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }
    ).document.documentElement;
    return root.scrollWidth - root.clientWidth;
  });
}

describe.skipIf(!runs)('a dashboard that tells the truth, in headless chromium', () => {
  let lc: LocalCluster;
  let browser: Browser;

  beforeAll(async () => {
    lc = await startLocalCluster({ cluster, logLevel: 'silent', heartbeat: HEARTBEAT });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: 'research' } });
    await lc.client.create('/api/v1/namespaces/research/pods', gpuPod('research', 'share-30', 30, 4096));
    // Over the quota: a refusal row with a long message, the widest table on the page.
    await lc.client
      .create('/api/v1/namespaces/research/pods', gpuPod('research', 'too-big', 40, 4096))
      .catch(() => undefined);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await lc?.close();
  });

  const open = (width: number): Promise<Page> => openDashboard(browser, `${lc.url}/`, { width, height: 900 });

  for (const width of [1400, 420]) {
    it(`fits ${width} px: no sideways overflow, and anchors land below the sticky header`, async () => {
      const page = await open(width);
      await expect.poll(() => page.locator('[data-testid=refusal]').count(), { timeout: 30_000 }).toBeGreaterThan(0);
      await expect.poll(() => page.locator('[data-testid=card]').count(), { timeout: 30_000 }).toBe(4);
      expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
      for (const anchor of ['quotas', 'reports', 'refusals']) {
        await page.locator(`nav a[href="#${anchor}"]`).click();
        await expect
          .poll(async () => {
            const header = await page.locator('header').boundingBox();
            const heading = await page.locator(`#${anchor} h2`).boundingBox();
            return heading && header ? heading.y - (header.y + header.height) : -1;
          })
          .toBeGreaterThanOrEqual(0);
      }
      await page.close();
    });
  }

  it('labels granted shares as promised and measured use as measured', async () => {
    const page = await open(1400);
    expect(await page.locator('#totals').textContent()).toContain('core promised');
    expect(await page.locator('[data-testid=card] .bar-label').first().textContent()).toContain('promised');
    expect(await page.locator('[data-testid=chart-gpu-hours-namespace] figcaption').textContent()).toMatch(
      /promised.*measured.*soft-limit burst/,
    );
    await page.close();
  });

  it('marks a node whose agent stopped unhealthy within its heartbeat limit, and the summary says so', async () => {
    const page = await open(1400);
    const node = page.locator('[data-testid=node][data-node="gpu-node-1"]');
    await expect.poll(() => node.getAttribute('data-agent'), { timeout: 30_000 }).toBe('reporting');
    expect(await page.locator('[data-testid=nodes-not-reporting]').count()).toBe(0);

    const stoppedAt = Date.now();
    await inThisProcess(lc.nodes[1]!).stopAgent();
    await expect.poll(() => node.getAttribute('data-agent'), { timeout: 90_000, interval: 250 }).toBe('not-reporting');
    const tookMs = Date.now() - stoppedAt;
    // Its limit, plus one heartbeat period it may have just renewed, plus the page's 2 s refresh,
    // with room for a loaded machine: far below the minute a node agent's silence took to show before.
    expect(tookMs).toBeLessThan((HEARTBEAT.staleSeconds + 1 + 14) * 1000);
    expect(await node.getAttribute('class')).toContain('unhealthy');
    expect(await node.locator('[data-testid=agent-not-reporting]').textContent()).toMatch(
      /node agent not reporting: last heartbeat \d+ s ago \(limit 5 s\)/,
    );
    const cards = node.locator('[data-testid=card]');
    expect(await cards.count()).toBe(2);
    for (const cls of await cards.evaluateAll((els) => els.map((e) => e.className))) expect(cls).toContain('unhealthy');
    expect(await page.locator('[data-testid=nodes-not-reporting]').textContent()).toBe(' (1 not reporting)');
    // The other node still reports.
    expect(await page.locator('[data-testid=node][data-node="gpu-node-0"]').getAttribute('data-agent')).toBe(
      'reporting',
    );

    const summary = await readSummary(
      lc.client,
      { core: 400, memoryMiB: 4 * 40960 },
      {
        limitSeconds: HEARTBEAT.staleSeconds,
        nowMs: Date.now(),
      },
    );
    expect(summary.nodesNotReporting).toEqual(['gpu-node-1']);
    expect(formatSummary(summary, 0)).toContain('NOT REPORTING: gpu-node-1');
    await page.close();
  }, 120_000);
});
