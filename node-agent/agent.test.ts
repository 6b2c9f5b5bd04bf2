import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { nodeInventorySchema, vcudaAnnotations } from '../contract/index.js';
import { type Harness, NODE, startHarness } from '../test/support/node-agent/agent-harness.js';
import { FakeGpuSource } from '../test/support/node-agent/fake-gpu-source.js';
import { createAgentHttp } from './http.js';
import { KUBELET_SOCKET } from './kubelet/protocol.js';
import type { CardMig, GpuCard, GpuEvent } from './nvml/gpu-source.js';

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

  it('offers a card in MIG mode neither whole nor as shares, and publishes its MIG layout', async () => {
    const layout: CardMig = { mode: 'enabled', profiles: [], instances: [] };
    class MigGpu extends FakeGpuSource {
      override listCards(): GpuCard[] {
        return super.listCards().map((c) => ({ ...c, migMode: c.index === 0 }));
      }
      override migLayout(cardIndex: number): CardMig | null {
        return cardIndex === 0 ? layout : { mode: 'disabled', profiles: [], instances: [] };
      }
    }
    h = await startHarness({
      machine: { cards: 2, memoryMiB: 4096 },
      config: { memoryAdvertise: 'node-status' },
      gpuSource: () => new MigGpu({ cards: 2, memoryMiB: 4096 }),
    });
    const { kubelet, names, cluster } = h;
    await kubelet.waitFor(() => kubelet.devices(names.core).length === 100, 'core plugin');
    expect(await h.agent.publishInventory()).toBe(true);
    expect(cluster.nodeCapacity.get(NODE)).toEqual({ [names.memory]: '4096' });
    const inv = nodeInventorySchema.parse(
      JSON.parse(cluster.nodeAnnotations.get(NODE)?.[vcudaAnnotations.inventory] as string),
    );
    expect(inv.cards.map((c) => c.mig?.mode)).toEqual(['enabled', 'disabled']);
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

  it('reports unhealthy while its plugins are not registered or NVML fails, and healthy again after', async () => {
    /** NVML whose event wait fails while `failing` is set, as a driver fault or a lost GPU makes it. */
    class FlakyGpu extends FakeGpuSource {
      failing = false;
      override waitEvent(timeoutMs: number, signal?: AbortSignal): Promise<GpuEvent | undefined> {
        if (this.failing) return Promise.reject(new Error('NVML_ERROR_UNKNOWN'));
        return super.waitEvent(timeoutMs, signal);
      }
    }
    const gpu = new FlakyGpu({ cards: 1, memoryMiB: 1024 });
    h = await startHarness({ gpuSource: () => gpu });
    const app = createAgentHttp(h.agent);
    const healthz = async () => {
      const res = await app.request('/healthz');
      return `${res.status} ${(await res.text()).trim()}`;
    };
    const checkMetric = async (check: string) =>
      new RegExp(`vcuda_agent_healthy\\{check="${check}"\\} (\\d)`).exec(
        await (await app.request('/metrics')).text(),
      )?.[1];
    expect(await healthz()).toBe('200 ok');
    expect(await checkMetric('device-plugins')).toBe('1');

    // The kubelet goes away and our socket with it: re-registration fails until it is back.
    rmSync(join(h.kubelet.pluginDir, KUBELET_SOCKET), { force: true });
    rmSync(join(h.kubelet.pluginDir, 'vcuda-core.sock'), { force: true });
    await vi.waitFor(async () => expect(await healthz()).toBe('503 device-plugins: not registered with the kubelet'));
    expect(await checkMetric('device-plugins')).toBe('0');
    await h.kubelet.restart();
    await vi.waitFor(async () => expect(await healthz()).toBe('200 ok'), { timeout: 5000 });

    gpu.failing = true;
    await vi.waitFor(
      async () => expect(await healthz()).toBe('503 nvml: waiting for GPU events failed: NVML_ERROR_UNKNOWN'),
      { timeout: 5000 },
    );
    expect(await checkMetric('nvml')).toBe('0');
    gpu.failing = false;
    await vi.waitFor(async () => expect(await healthz()).toBe('200 ok'), { timeout: 5000 });

    await h.agent.stop();
    expect(await healthz()).toMatch(/^503 agent: stopping/);
  });
});
