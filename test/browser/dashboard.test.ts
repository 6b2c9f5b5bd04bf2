/**
 * The dashboard in a real browser: the page loads from the control plane, draws the cards with the
 * ledger's numbers, shows a refused pod, follows live updates, and leaves a screenshot in
 * test-results/dashboard.png for a person to look at.
 */
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { serve } from '@hono/node-server';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventReasons, podEvent } from '../../contract/index.js';
import { createApp } from '../../control-plane/app.js';
import { createPreemptionLog } from '../../control-plane/dashboard/preemption-log.js';
import { createRefusalLog } from '../../control-plane/dashboard/refusal-log.js';
import { dashboardRoutes } from '../../control-plane/dashboard/routes.js';
import { chromiumPath, hasChromium, launchChromium, saveScreenshot } from './chromium.js';
import { BURSTING, CLAIM, seededDashboard } from './seeded-dashboard.js';

const runs = hasChromium() || Boolean(process.env.CI);
// The CI machine has two cores shared by every suite: give the page time rather than flake.
const slow = { timeout: 20_000, interval: 100 };

describe.skipIf(!runs)('dashboard in headless chromium', () => {
  let browser: Browser;
  let page: Page;
  let close: () => Promise<void>;
  let baseUrl: string;
  const refusals = createRefusalLog();
  const preemptions = createPreemptionLog();
  const seeded = seededDashboard({
    readRefusals: (n) => refusals.readRefusals(n),
    readPreemptions: (n) => preemptions.readPreemptions(n),
  });

  beforeAll(async () => {
    await seeded.start();
    refusals.record({
      at: new Date().toISOString(),
      stage: 'quota',
      cluster: 'local',
      namespace: 'research',
      pod: 'too-big',
      reason: eventReasons.quotaRefused,
      message: 'quota research: core 200 + 50 requested > limit 200 (over by 50)',
    });
    // User-controlled text (pod names, messages) must reach the page as text, never as markup.
    refusals.record({
      at: new Date(Date.now() - 60_000).toISOString(),
      stage: 'admission',
      cluster: 'local',
      namespace: 'research',
      pod: 'x<img src=x onerror="window.__pwned=1">',
      reason: eventReasons.admissionRefused,
      message: '<script>window.__pwned=2</script> spec.containers[0]: a share is 1..99',
    });
    // Both sides of one preemption, as the extender and kube-scheduler write them.
    const at = { component: 'vcuda', now: new Date(), nameSuffix: 'p' };
    const urgent = { namespace: 'research', name: 'urgent', uid: 'u-urgent' };
    preemptions.recordEvent(
      podEvent(
        urgent,
        eventReasons.preempting,
        'preempting lower-priority pods on gpu-node-0 for GPU-7: research/low-14 (priority 0), research/low-15 (priority 0)',
        at,
      ),
      'local',
    );
    preemptions.recordEvent(
      podEvent(
        { namespace: 'research', name: 'low-14', uid: 'u-14' },
        'Preempted' as never,
        'Preempted by pod u-urgent on node gpu-node-0',
        at,
      ),
      'local',
    );
    const app = createApp({
      dashboard: dashboardRoutes({
        source: seeded.source,
        clock: () => new Date(),
        cacheMs: 100,
        streamIntervalMs: 200,
      }),
    });
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => new Promise<void>((resolve) => server.close(() => resolve()));
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
    const external: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(baseUrl)) external.push(r.url());
    });
    page.on('pageerror', (e) => {
      throw e;
    });
    await page.goto(baseUrl);
    await page.locator('body[data-rendered]').waitFor();
    expect(external).toEqual([]);
  });

  afterAll(async () => {
    await browser?.close();
    // Open EventSource connections would keep the server alive: the browser goes first.
    await close?.();
    await seeded.stop();
  });

  it('draws every card with the ledger’s core and memory numbers', async () => {
    const expected = seeded.expectedCards();
    await expect.poll(() => page.locator('[data-testid=card]').count(), slow).toBe(expected.length);
    for (const card of expected) {
      const box = page.locator(`[data-testid=card][data-uuid="${card.uuid}"]`);
      expect(await box.locator('[data-testid=core-bar]').textContent()).toBe(`${card.coreUsed} / 100 core`);
      expect(await box.locator('[data-testid=memory-bar]').textContent()).toBe(
        `${card.memoryUsedMiB.toLocaleString('en-US')} / ${card.memoryMiB.toLocaleString('en-US')} MiB`,
      );
      const pods = await box.locator('[data-testid=pod] .pod-name').allInnerTexts();
      expect(pods.sort()).toEqual(card.pods.sort());
    }
  });

  it('lists a DRA claim’s share on its card, marked as a claim and not as a pod', async () => {
    const box = page.locator(`[data-testid=card][data-uuid="${CLAIM.card}"]`);
    const claim = box.locator('[data-testid=pod][data-holder=claim]');
    await expect.poll(() => claim.count(), slow).toBe(1);
    expect(await claim.locator('.pod-name').innerText()).toBe(`${CLAIM.namespace}/${CLAIM.name}`);
    expect(await claim.locator('[data-testid=claim-badge]').innerText()).toBe('claim');
    expect(await claim.innerText()).toContain(`${CLAIM.core}% · ${CLAIM.memoryMiB.toLocaleString('en-US')} MiB`);
    // Every other row on the page is a pod, with no claim badge.
    expect(await page.locator('[data-testid=pod][data-holder=pod] [data-testid=claim-badge]').count()).toBe(0);
    expect(await page.locator('[data-testid=pod][data-holder=claim]').count()).toBe(1);
  });

  it('badges the bursting pod, and its card, from its latest usage sample', async () => {
    const badges = page.locator('[data-testid=pod]:has([data-testid=burst])');
    await expect.poll(() => badges.count(), slow).toBe(1);
    expect(await badges.locator('.pod-name').innerText()).toBe(BURSTING.pod);
    expect(await badges.locator('[data-testid=burst]').innerText()).toBe(
      `burst +${BURSTING.mib.toLocaleString('en-US')} MiB`,
    );
    expect(await badges.locator('[data-testid=burst]').getAttribute('title')).toContain('512 MiB of it evicted');
    const bursting = page.locator('[data-testid=card]:has([data-testid=card-bursting])');
    expect(await bursting.getAttribute('data-uuid')).toBe(BURSTING.card);
    expect(await bursting.count()).toBe(1);
  });

  it('shows the refused pod with its stage and message', async () => {
    const row = page.locator('[data-testid=refusal][data-pod="research/too-big"]');
    await expect.poll(() => row.count(), slow).toBe(1);
    expect(await row.getAttribute('data-stage')).toBe('quota');
    expect(await row.textContent()).toContain('over by 50');
  });

  it('says who preempted whom and why', async () => {
    const preemptor = page.locator('[data-testid=preemption][data-pod="research/urgent"]');
    await expect.poll(() => preemptor.count(), slow).toBe(1);
    expect(await preemptor.getAttribute('data-role')).toBe('preemptor');
    expect(await preemptor.textContent()).toContain('research/low-14 (priority 0), research/low-15 (priority 0)');
    const victim = page.locator('[data-testid=preemption][data-pod="research/low-14"]');
    expect(await victim.getAttribute('data-role')).toBe('victim');
    expect(await victim.textContent()).toContain('Preempted by pod u-urgent on node gpu-node-0');
  });

  it('renders user-controlled text as text', async () => {
    const row = page.locator('[data-testid=refusal][data-stage=admission]');
    await expect.poll(() => row.count(), slow).toBe(1);
    expect(await row.textContent()).toContain('<script>window.__pwned=2</script>');
    expect(await page.locator('#refusal-list img, #refusal-list script').count()).toBe(0);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
  });

  it('offers the ledger’s clusters and shows the one picked', async () => {
    const picker = page.locator('[data-testid=cluster-picker]');
    expect(await picker.locator('option').allTextContents()).toEqual(['all clusters', 'local']);
    const asked = page.waitForRequest((r) => r.url().includes('cluster=local'));
    await picker.selectOption('local');
    await asked;
    await expect.poll(() => page.locator('[data-testid=card]').count(), slow).toBe(seeded.expectedCards().length);
    await picker.selectOption('');
  });

  it('asks for the report window the operator picks', async () => {
    const asked = page.waitForRequest((r) => r.url().includes('/ui/stream?windowHours=168'));
    await page.selectOption('[data-testid=window]', '168');
    await asked;
    await expect.poll(() => page.locator('[data-testid=live]').getAttribute('data-state'), slow).toBe('live');
    await page.selectOption('[data-testid=window]', '24');
  });

  it('shows quota use, GPU-hours and fragmentation charts', async () => {
    expect(await page.locator('[data-testid=quota]').count()).toBeGreaterThan(0);
    expect(await page.locator('[data-testid=gpu-hours-ns] rect').count()).toBeGreaterThan(0);
    expect(await page.locator('[data-testid=idle-row]').count()).toBeGreaterThan(0);
  });

  it('follows live updates without a reload', async () => {
    const changed = await seeded.placeOnePod();
    const box = page.locator(`[data-testid=card][data-uuid="${changed.uuid}"]`);
    await expect
      .poll(() => box.locator('[data-testid=core-bar]').textContent(), slow)
      .toBe(`${changed.coreUsed} / 100 core`);
    expect(await page.locator('[data-testid=live]').getAttribute('data-state')).toBe('live');
  });

  it('paints the first state without the stream, as a plain chromium --dump-dom sees it', async () => {
    const { stdout } = await promisify(execFile)(
      chromiumPath,
      ['--headless', '--no-sandbox', '--disable-gpu', '--dump-dom', baseUrl],
      { timeout: 30_000, maxBuffer: 16 * 1024 * 1024 },
    );
    expect(stdout).toMatch(/<body[^>]* data-rendered="/);
    expect(stdout).not.toContain('loading…');
    for (const c of seeded.expectedCards()) expect(stdout).toContain(`data-uuid="${c.uuid}"`);
  });

  it('serves its icon and loads nothing that fails', async () => {
    const fresh = await browser.newPage();
    const failed: string[] = [];
    fresh.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
    });
    await fresh.goto(baseUrl);
    await fresh.locator('body[data-rendered]').waitFor();
    const icon = await fresh.request.get(`${baseUrl}/ui/favicon.svg`);
    expect(icon.headers()['content-type']).toBe('image/svg+xml');
    expect(failed).toEqual([]);
    await fresh.close();
  });

  it('lands a nav link section below the sticky header', async () => {
    await page.locator('nav a[href="#refusals"]').click();
    const headerBottom = await page.locator('header').evaluate((h) => h.getBoundingClientRect().bottom);
    const headingTop = await page.locator('#refusals h2').evaluate((h) => h.getBoundingClientRect().top);
    expect(headingTop).toBeGreaterThanOrEqual(headerBottom);
  });

  it('keeps the pickers and the live badge on a 420 px screen', async () => {
    const narrow = await browser.newPage({ viewport: { width: 420, height: 800 } });
    await narrow.goto(baseUrl);
    await narrow.locator('body[data-rendered]').waitFor();
    for (const id of ['window', 'cluster', 'live', 'burst']) {
      const box = await narrow.locator(id === 'burst' ? '[data-testid=burst]' : `#${id}`).boundingBox();
      expect(box, id).not.toBeNull();
      expect(box!.x + box!.width, id).toBeLessThanOrEqual(420);
    }
    await narrow.close();
  });

  it('saves a screenshot a person can look at', async () => {
    const shot = await saveScreenshot(page, 'dashboard-seeded.png');
    // A full page of cards, not a blank or a "loading…" frame.
    expect(shot.height).toBeGreaterThan(800);
  });
});
