import { afterEach, describe, expect, it, vi } from 'vitest';
import { nodeInventorySchema, vcudaAnnotations } from '../contract/index.js';
import { createAgentHttp } from './http.js';
import { type Harness, NODE, startHarness } from './testing/agent-harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('node agent', () => {
  it('advertises memory as node capacity when so configured, and lowers it when a card fails', async () => {
    h = await startHarness({ machine: { cards: 2, memoryMiB: 4096 }, config: { memoryAdvertise: 'node-status' } });
    const { kubelet, names, cluster } = h;
    await kubelet.waitFor(() => kubelet.devices(names.core).length === 200, 'core plugin');
    expect(kubelet.registrations.map((r) => r.resource_name)).toEqual([names.core]);
    expect(h.agent.memoryPlan.via).toBe('node-status');

    expect(await h.agent.publishInventory()).toBe(true);
    expect(cluster.nodeCapacity.get(NODE)).toEqual({ [names.memory]: '8192' });
    const inv = nodeInventorySchema.parse(
      JSON.parse(cluster.nodeAnnotations.get(NODE)?.[vcudaAnnotations.inventory] as string),
    );
    expect(inv.cards.map((c) => c.healthy)).toEqual([true, true]);
    expect(await h.agent.publishInventory()).toBe(false);

    h.gpu.emit({ cardIndex: 0, kind: 'xid', xid: 79 });
    await kubelet.waitFor(() => kubelet.devices(names.core).some((d) => d.health === 'Unhealthy'), 'health');
    await vi.waitFor(() => expect(cluster.nodeCapacity.get(NODE)?.[names.memory]).toBe('4096'));
    const after = nodeInventorySchema.parse(
      JSON.parse(cluster.nodeAnnotations.get(NODE)?.[vcudaAnnotations.inventory] as string),
    );
    expect(after.cards[0]).toMatchObject({ healthy: false, healthReason: 'Xid 79' });
  });

  it('serves /healthz and /metrics', async () => {
    h = await startHarness();
    const app = createAgentHttp(h.agent);
    expect((await app.request('/healthz')).status).toBe(200);
    const res = await app.request('/metrics');
    const text = await res.text();
    expect(text).toMatch(/vcuda_card_memory_total_bytes\{card="GPU-[^"]+",index="0"\} 4294967296/);
    expect(text).toMatch(/vcuda_card_healthy\{card="GPU-[^"]+",index="1"\} 1/);
    expect(text).toContain('# TYPE vcuda_allocate_duration_seconds histogram');
  });
});
