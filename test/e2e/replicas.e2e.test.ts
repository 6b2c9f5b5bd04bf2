/**
 * Control-plane replicas in the simulated cluster: two serving at once behind one Service never
 * overcommit a card, and killing one in the middle of binding loses no pod and leaks no capacity.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { corePerCard, gpuPod, liveRows } from './e2e-helpers.js';

const NS = 'replicas';

async function bindsServed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('vcuda_extender_request_duration_seconds_count') && l.includes('bind'))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

describe('control-plane replicas', () => {
  let lc: LocalCluster;

  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'replicas',
        nodes: [{ namePrefix: 'node', count: 2, cards: 4, memoryMiB: 8192 }],
      }),
      replicas: 2,
      logLevel: (process.env.VCUDA_TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent',
      schedulerBackoffMs: { initial: 100, max: 1000 },
      // A kept-alive connection pins every call to one replica; these tests are about two binding at once.
      schedulerExtenderKeepAlive: false,
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  const pods = async () => (await lc.client.list(podPath(NS))).items;
  const running = async () => (await pods()).filter((p) => (p.status as { phase?: string }).phase === 'Running').length;
  afterEach(async () => removeAll(), 60_000);
  const removeAll = async () => {
    for (const p of await pods()) await lc.client.delete(podPath(NS, p.metadata.name)).catch(() => {});
    await expect.poll(async () => (await pods()).length, { timeout: 20_000 }).toBe(0);
    await expect.poll(async () => (await liveRows(lc.db)).length, { timeout: 20_000 }).toBe(0);
  };

  it('two replicas bind at once and no card is ever promised more than 100', async () => {
    // 8 cards x 2 shares of 40: exactly full; a third share on any card would overcommit it.
    await Promise.all(Array.from({ length: 16 }, (_, i) => lc.client.create(podPath(NS), gpuPod(`s-${i}`, 40, 1024))));
    await expect.poll(running, { timeout: 60_000, interval: 500 }).toBe(16);
    for (const core of corePerCard(await pods()).values()) expect(core).toBeLessThanOrEqual(100);
    const byCard = new Map<string, number>();
    for (const r of await liveRows(lc.db)) byCard.set(r.cardUuid, (byCard.get(r.cardUuid) ?? 0) + r.core);
    expect([...byCard.values()].every((c) => c <= 100)).toBe(true);
    expect(byCard.size).toBe(8);
    const served = await Promise.all(lc.replicas().map((r) => bindsServed(r!.url)));
    expect(served.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(16);
    // Both replicas took binds: the Service spread the scheduler's calls over them.
    expect(served.every((n) => n > 0)).toBe(true);
  }, 90_000);

  it('loses no pod and leaks no capacity when a replica dies mid-bind', async () => {
    await Promise.all(Array.from({ length: 8 }, (_, i) => lc.client.create(podPath(NS), gpuPod(`k-${i}`, 50, 2048))));
    // Kill a replica as soon as the first bind lands, while the others are still in flight.
    await expect
      .poll(async () => (await pods()).some((p) => (p.spec as { nodeName?: string }).nodeName), {
        timeout: 30_000,
        interval: 50,
      })
      .toBe(true);
    await lc.killReplica(0);
    await expect.poll(running, { timeout: 60_000, interval: 500 }).toBe(8);
    const uids = new Set((await pods()).map((p) => p.metadata.uid));
    // Every live reservation belongs to a running pod (a dead replica's half-done bind was released or reused).
    await expect
      .poll(async () => (await liveRows(lc.db)).every((r) => uids.has(r.podUid)), { timeout: 90_000 })
      .toBe(true);
    for (const core of corePerCard(await pods()).values()) expect(core).toBeLessThanOrEqual(100);
    await lc.startReplica(0);
  }, 90_000);

  // Guards a race this suite found: a replica's periodic reconcile must never release a reservation
  // made after its pod list was taken while that pod goes on to run on the card.
  it('every running pod keeps its ledger rows (invariant 1 across a reconcile tick)', async () => {
    await Promise.all(Array.from({ length: 8 }, (_, i) => lc.client.create(podPath(NS), gpuPod(`r-${i}`, 50, 2048))));
    await expect.poll(running, { timeout: 60_000, interval: 500 }).toBe(8);
    // Across the 60 s reconcile period of both replicas.
    await new Promise((r) => setTimeout(r, 65_000));
    const held = new Set((await liveRows(lc.db)).map((r) => r.podUid));
    expect((await pods()).filter((p) => !held.has(p.metadata.uid!)).map((p) => p.metadata.name)).toEqual([]);
  }, 150_000);
});
