/**
 * The dashboard of `vcuda local` on sim/examples/mig-cluster.yaml: a card in MIG mode is drawn as
 * its instances on its 8 memory slices (profile, placement, holder), the card out of MIG mode as
 * usual. A pod holding a 3g.40gb instance shows on that instance, where its signed grant placed it.
 * Node h100-shared's shared 3g.40gb is drawn on its card too, with its share pod, and counts in the
 * node's totals as part of that card, never as a card beside it.
 * Screenshot: test-results/dashboard-mig.png.
 */
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { peekAssignment, vcudaAnnotations } from '../../contract/index.js';
import type { Overview } from '../../control-plane/dashboard/overview.js';
import { loadClusterSpec } from '../../sim/cluster-spec.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { hasChromium, launchChromium, openDashboard, saveScreenshot } from './chromium.js';

const runs = hasChromium() || Boolean(process.env.CI);
const slow = { timeout: 20_000, interval: 100 };
const EXAMPLE = join(import.meta.dirname, '..', '..', 'sim', 'examples', 'mig-cluster.yaml');

describe.skipIf(!runs)('dashboard of a MIG cluster in headless chromium', () => {
  let lc: LocalCluster;
  let browser: Browser;
  let page: Page;
  let grant: { uuid: string; parent: string; start: number };
  let shareUuid: string;

  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: await loadClusterSpec(EXAMPLE),
      logLevel: 'silent',
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: 'ml' } });
    const limits = { 'nvidia.com/mig-3g.40gb': '1' };
    await lc.client.create('/api/v1/namespaces/ml/pods', {
      metadata: { name: 'train' },
      spec: { containers: [{ name: 'main', image: 'cuda', command: ['sleep', '600'], resources: { limits } }] },
    });
    const shareLimits = { 'nvidia.com/vcuda-core': '50', 'nvidia.com/vcuda-memory': '4096' };
    await lc.client.create('/api/v1/namespaces/ml/pods', {
      metadata: { name: 'share' },
      spec: {
        nodeSelector: { 'kubernetes.io/hostname': 'h100-shared' },
        containers: [{ name: 'main', image: 'cuda', command: ['sleep', '600'], resources: { limits: shareLimits } }],
      },
    });
    const firstCard = async (pod: string) => {
      const p = (await lc.client.get(`/api/v1/namespaces/ml/pods/${pod}`)) as {
        metadata: { annotations?: Record<string, string> };
      };
      return peekAssignment(p.metadata.annotations?.[vcudaAnnotations.assignment] ?? '')?.containers[0]?.cards[0];
    };
    const deadline = Date.now() + 60_000;
    for (;;) {
      const card = await firstCard('train');
      const share = await firstCard('share');
      if (card?.mig && share) {
        grant = { uuid: card.uuid, parent: card.mig.parent, start: card.mig.start };
        shareUuid = share.uuid;
        break;
      }
      if (Date.now() > deadline) throw new Error('timed out waiting for ml/train and ml/share to be bound');
      await new Promise((r) => setTimeout(r, 200));
    }
    browser = await launchChromium();
    page = await openDashboard(browser, `${lc.url}/`);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await lc?.close();
  });

  it('draws each MIG card as its instances, the held one with its pod where the grant placed it', async () => {
    const node = page.locator('[data-testid=node][data-node="h100-mig"]');
    await expect.poll(() => node.locator('[data-testid=mig-instance]').count(), slow).toBe(5);
    const parent = node.locator(`[data-testid=card][data-uuid="${grant.parent}"]`);
    const instances = parent.locator('[data-testid=mig-instance]');
    expect(
      await instances.evaluateAll((els) => els.map((e) => `${e.dataset['profile']}@${e.dataset['start']}`)),
    ).toEqual(['3g.40gb@0', '3g.40gb@4']);
    const held = parent.locator('[data-testid=mig-instance][data-held=true]');
    await expect.poll(() => held.count(), slow).toBe(1);
    expect(await held.getAttribute('data-uuid')).toBe(grant.uuid);
    expect(await held.getAttribute('data-start')).toBe(String(grant.start));
    expect(await held.locator('.mig-holder').textContent()).toBe('ml/train');
    const small = node.locator('[data-testid=card]', { has: page.locator('[data-profile="1g.20gb"]') });
    expect(
      await small
        .locator('[data-testid=mig-instance]')
        .evaluateAll((els) => els.map((e) => `${e.dataset['profile']}@${e.dataset['start']}/${e.dataset['size']}`)),
    ).toEqual(['1g.10gb@0/1', '1g.20gb@2/2', '2g.20gb@4/2']);
    // The card out of MIG mode keeps its bars; no card of the node is drawn unhealthy.
    expect(await node.locator('[data-testid=core-bar]').count()).toBe(1);
    expect(await node.locator('[data-testid=card].unhealthy').count()).toBe(0);
    const shot = await saveScreenshot(page, 'dashboard-mig.png');
    expect(shot.bytes).toBeGreaterThan(20_000);
  });

  it('draws a shared instance on its card with its shares, and counts it as part of that card', async () => {
    const node = page.locator('[data-testid=node][data-node="h100-shared"]');
    const shared = node.locator('[data-testid=mig-instance][data-shared=true]');
    await expect
      .poll(() => shared.locator('.mig-holder').allTextContents(), slow)
      .toEqual(['shared · 1 pod · 50 / 100 core']);
    expect(await node.locator('[data-testid=card]').count()).toBe(1);
    expect(await shared.getAttribute('data-uuid')).toBe(shareUuid);
    expect(await shared.getAttribute('data-start')).toBe('4');
    const overview = (await (await fetch(`${lc.url}/ui/overview`)).json()) as Overview;
    const view = overview.clusters.flatMap((c) => c.nodes).find((n) => n.name === 'h100-shared');
    // Half the instance's core on half the card; the card's memory once, not the instance's beside it.
    expect(view?.totals).toMatchObject({
      cards: 1,
      coreUsed: 25,
      coreCapacity: 100,
      memoryUsedMiB: 4096,
      memoryCapacityMiB: 81559,
    });
  });
});
