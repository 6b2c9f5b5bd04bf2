import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, startHarness } from '../../test/support/node-agent/agent-harness.js';
import { FakeKubelet } from '../../test/support/node-agent/fake-kubelet.js';
import { HEALTHY, KUBELET_SOCKET, UNHEALTHY } from '../kubelet/protocol.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('device plugins with a kubelet over real gRPC sockets', () => {
  it('register both resources with version v1beta1 and stream their devices', async () => {
    h = await startHarness({ machine: { cards: 2, memoryMiB: 1024, cardsPerNuma: 1 } });
    const { kubelet, names } = h;
    await kubelet.waitFor(() => kubelet.devices(names.core).length === 200, 'core devices');
    await kubelet.waitFor(() => kubelet.devices(names.memory).length === 2048, 'memory devices');
    const byResource = new Map(kubelet.registrations.map((r) => [r.resource_name, r]));
    expect(byResource.get(names.core)).toMatchObject({
      version: 'v1beta1',
      endpoint: 'vcuda-core.sock',
      options: { pre_start_required: true, get_preferred_allocation_available: true },
    });
    expect(byResource.get(names.memory)?.endpoint).toBe('vcuda-memory.sock');
    const core = kubelet.devices(names.core);
    expect(core.every((d) => d.health === HEALTHY)).toBe(true);
    expect(core.find((d) => d.ID === 'c1-00')?.topology?.nodes).toEqual([{ ID: 1 }]);
  });

  it('re-registers after the kubelet restarts and deletes every socket', async () => {
    h = await startHarness();
    const { kubelet, names } = h;
    await kubelet.waitFor(() => kubelet.devices(names.core).length === 200, 'first registration');
    const before = kubelet.registrations.length;
    await kubelet.restart();
    await kubelet.waitFor(
      () => kubelet.registrations.length >= before + 2 && kubelet.devices(names.core).length === 200,
      're-registration',
    );
    expect(
      kubelet.registrations
        .slice(before)
        .map((r) => r.resource_name)
        .sort(),
    ).toEqual([names.core, names.memory].sort());
  });

  it('keeps retrying Register until a kubelet answers', async () => {
    h = await startHarness();
    const { kubelet, names, warnings } = h;
    await kubelet.waitFor(() => kubelet.devices(names.core).length === 200, 'first registration');
    // The kubelet goes away, its socket with it, and our socket vanishes: the plugin must register
    // again while nothing answers Register.
    await kubelet.stop();
    rmSync(join(kubelet.pluginDir, KUBELET_SOCKET), { force: true });
    rmSync(join(kubelet.pluginDir, 'vcuda-core.sock'));
    const failedRegisters = () => warnings.filter((w) => /register \S+ failed/.test(w)).length;
    await expect.poll(failedRegisters, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    expect(h.agent.runner.isRegistered()).toBe(false);
    const next = await FakeKubelet.start(h.root);
    try {
      await next.waitFor(
        () => next.devices(names.core).length === 200 && next.devices(names.memory).length === 8192,
        'registration with the kubelet that came back',
      );
      expect(new Set(next.registrations.map((r) => r.resource_name))).toEqual(new Set([names.core, names.memory]));
    } finally {
      await next.stop();
    }
  });

  it('streams a critical Xid as the card turning unhealthy, and ignores application Xids', async () => {
    h = await startHarness();
    const { kubelet, names, gpu } = h;
    await kubelet.waitFor(() => kubelet.devices(names.core).length === 200, 'registration');
    const updates = kubelet.updates(names.core);
    gpu.emit({ cardIndex: 1, kind: 'xid', xid: 13 });
    gpu.emit({ cardIndex: 1, kind: 'xid', xid: 79 });
    await kubelet.waitFor(() => kubelet.updates(names.core) > updates, 'health update');
    const core = kubelet.devices(names.core);
    expect(core.filter((d) => d.ID.startsWith('c1-')).every((d) => d.health === UNHEALTHY)).toBe(true);
    expect(core.filter((d) => d.ID.startsWith('c0-')).every((d) => d.health === HEALTHY)).toBe(true);
    // Exactly one update: Xid 13 is the application's fault and changed nothing.
    expect(kubelet.updates(names.core)).toBe(updates + 1);
    const unhealthyMemory = () => kubelet.devices(names.memory).filter((d) => d.health === UNHEALTHY).length;
    await kubelet.waitFor(() => unhealthyMemory() > 0, 'memory health update');
    expect(unhealthyMemory()).toBe(4096);
    expect(h.agent.health.cardByUuid(h.gpu.cards[1]?.uuid ?? '')?.healthReason).toBe('Xid 79');
  });
});
