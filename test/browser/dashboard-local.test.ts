/**
 * The dashboard of `vcuda local`: the simulated cluster (API server, webhook, scheduler and
 * extender, ledger, kubelets and node agents) runs in this process; pods are created through the
 * API server like `kubectl apply` would. The page must show every simulated card with the numbers
 * the pods' signed assignments grant, and the pod the quota refused. Screenshot:
 * test-results/dashboard.png.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { peekAssignment, vcudaAnnotations } from '../../contract/index.js';
import { expandNodes } from '../../sim/cluster-spec.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { hasChromium, launchChromium, openDashboard, saveScreenshot } from './chromium.js';
import { twoNodeCluster as cluster, gpuPod } from './local-cluster-fixture.js';

const runs = hasChromium() || Boolean(process.env.CI);
// The CI machine has two cores shared by every suite: give the page time rather than flake.
const slow = { timeout: 20_000, interval: 100 };

type PodObject = {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec?: { nodeName?: string };
};

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe.skipIf(!runs)('dashboard of vcuda local in headless chromium', () => {
  let lc: LocalCluster;
  let browser: Browser;
  let page: Page;
  const bound: PodObject[] = [];

  beforeAll(async () => {
    lc = await startLocalCluster({ cluster, logLevel: 'silent', schedulerBackoffMs: { initial: 200, max: 1000 } });
    for (const ns of ['research', 'serving']) await lc.client.create('/api/v1/namespaces', { metadata: { name: ns } });
    // share-30 takes part of a card; two-cards then needs a node with two free cards: both nodes are used.
    await lc.client.create('/api/v1/namespaces/research/pods', gpuPod('research', 'share-30', 30, 8192));
    await lc.client.create('/api/v1/namespaces/serving/pods', gpuPod('serving', 'two-cards', 200));
    for (const [ns, name] of [
      ['research', 'share-30'],
      ['serving', 'two-cards'],
    ] as const) {
      bound.push(
        await waitFor(`${ns}/${name} bound`, async () => {
          const p = (await lc.client.request('GET', `/api/v1/namespaces/${ns}/pods/${name}`)) as PodObject;
          return p.spec?.nodeName && p.metadata.annotations?.[vcudaAnnotations.assignment] ? p : undefined;
        }),
      );
    }
    // Over research's quota: refused at admission or at bind, either way an Event and a row on the page.
    await lc.client
      .create('/api/v1/namespaces/research/pods', gpuPod('research', 'too-big', 30, 4096))
      .catch(() => undefined);

    browser = await launchChromium();
    page = await openDashboard(browser, `${lc.url}/`);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await lc?.close();
  });

  it('draws every simulated card with the core and memory the pods were granted', async () => {
    const granted = new Map<string, { core: number; memoryMiB: number; pods: string[] }>();
    for (const p of bound) {
      const a = peekAssignment(p.metadata.annotations?.[vcudaAnnotations.assignment] ?? '');
      expect(a, `${p.metadata.name} carries a readable assignment`).toBeDefined();
      for (const c of a?.containers ?? []) {
        for (const g of c.cards) {
          const row = granted.get(g.uuid) ?? { core: 0, memoryMiB: 0, pods: [] };
          row.core += g.core;
          row.memoryMiB += g.memoryBytes / 1048576;
          row.pods.push(`${p.metadata.namespace}/${p.metadata.name}`);
          granted.set(g.uuid, row);
        }
      }
    }
    const simulated = expandNodes(cluster).flatMap((n) => n.cards.map((c) => ({ node: n.name, ...c })));
    await expect.poll(() => page.locator('[data-testid=card]').count(), slow).toBe(simulated.length);
    for (const card of simulated) {
      const want = granted.get(card.uuid) ?? { core: 0, memoryMiB: 0, pods: [] };
      const box = page.locator(`[data-testid=card][data-uuid="${card.uuid}"]`);
      expect(await box.getAttribute('data-node')).toBe(card.node);
      expect(await box.locator('[data-testid=core-bar]').textContent()).toBe(`${want.core} / 100 core`);
      expect(await box.locator('[data-testid=memory-bar]').textContent()).toBe(
        `${want.memoryMiB.toLocaleString('en-US')} / ${card.memoryMiB.toLocaleString('en-US')} MiB`,
      );
      expect((await box.locator('[data-testid=pod] .pod-name').allTextContents()).sort()).toEqual(want.pods.sort());
    }
    // The two pods used both nodes: share-30 one card, two-cards two whole cards.
    expect([...granted.values()].map((g) => g.core).sort((a, b) => a - b)).toEqual([30, 100, 100]);
  });

  it('shows the pod the quota refused', async () => {
    const row = page.locator('[data-testid=refusal][data-pod="research/too-big"]');
    await expect.poll(() => row.count(), slow).toBeGreaterThan(0);
    expect(['quota', 'bind', 'scheduling', 'admission']).toContain(await row.first().getAttribute('data-stage'));
    expect(await row.first().textContent()).toMatch(/quota|research/i);
  });

  it('shows research at its quota', async () => {
    const quota = page.locator('[data-testid=quota][data-name="research"]');
    await expect.poll(() => quota.count(), slow).toBe(1);
    expect(await quota.locator('[data-testid=quota-core]').textContent()).toBe('30 / 50');
  });

  it('saves a screenshot of every simulated card', async () => {
    const shot = await saveScreenshot(page, 'dashboard.png');
    // The page with its four cards, quotas and refusals (about 1400 x 1040 and 130 KiB here); a
    // blank or "loading…" frame is a few KiB and no taller than the window.
    expect(shot.width).toBeGreaterThanOrEqual(1000);
    expect(shot.height).toBeGreaterThan(800);
    expect(shot.bytes).toBeGreaterThan(40_000);
  });
});
