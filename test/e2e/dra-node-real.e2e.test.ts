/**
 * The node agent as a DRA driver against the real control plane v1.36 (`../shared/kubernetes-1.36/`:
 * kube-apiserver, kube-scheduler, kube-controller-manager; no kubelet, so the test calls the
 * plugin's sockets as the kubelet would): the real API server accepts the agent's slice and its
 * taint, the real scheduler allocates a share on it (avoiding the tainted card, rounding memory up to
 * the step), Prepare takes what the scheduler wrote and writes that limit, a claim whose status
 * names a device the node does not have is refused, and the claim is unprepared when it is freed.
 * Skipped, saying why, without that directory.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeLimitConfig } from '../../contract/index.js';
import { containerPaths } from '../../node-agent/limits/container-files.js';
import { type KubeClient, podPath } from '../../sim/kube-client.js';
import { createVcudaDeviceClass, deletePodNow } from '../support/dra-node-tier.js';
import type { DraKubeletClient } from '../support/node-agent/dra-harness.js';
import { FakeGpuSource } from '../support/node-agent/fake-gpu-source.js';
import { real136SkipReason } from '../support/real-control-plane-136.js';
import { type RealDraNode, startRealDraNode } from '../support/real-dra-node.js';

const skipReason = real136SkipReason('real kube-apiserver + kube-scheduler + kube-controller-manager v1.36');
if (skipReason) console.warn(`dra-node-real: skipped: ${skipReason}`);

const GV = '/apis/resource.k8s.io/v1';
const DRIVER = 'gpu.vcuda.io';
const CLAIMS = `${GV}/namespaces/default/resourceclaims`;
const MiB = 2 ** 20;

describe.skipIf(skipReason !== undefined)('the DRA node agent against the real 1.36 control plane', () => {
  let real: RealDraNode | undefined;
  let client: KubeClient;
  let dir: string;
  let kubelet: DraKubeletClient;
  let gpu: FakeGpuSource;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dra-real-'));
    gpu = new FakeGpuSource({ cards: 2, memoryMiB: 81920 });
    real = await startRealDraNode({ nodeName: 'node-a', dir, gpu, createDeviceClasses: createVcudaDeviceClass });
    client = real.client;
    kubelet = real.kubelet;
  }, 300_000);

  afterAll(async () => {
    await real?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  const slice = async () => {
    const first = (await client.list(`${GV}/resourceslices`)).items[0];
    if (!first) throw new Error('no ResourceSlice published');
    return first;
  };
  const claimStatus = async (name: string) =>
    (await client.get(`${CLAIMS}/${name}`))['status'] as Record<string, unknown>;

  it('publishes a slice the real API server accepts, owned by the Node, and a taint on a card whose health failed', async () => {
    const s = await slice();
    const owners = (s.metadata as { ownerReferences?: { kind: string; name: string }[] }).ownerReferences;
    expect(owners?.[0]).toMatchObject({ kind: 'Node', name: 'node-a' });
    const spec = s['spec'] as { pool: { generation: number }; devices: { name: string; taints?: unknown[] }[] };
    expect(spec.pool.generation).toBe(1);
    expect(spec.devices.map((d) => d.name)).toEqual(['gpu-0', 'gpu-1']);
    gpu.emit({ cardIndex: 1, kind: 'xid', xid: 79 });
    await expect
      .poll(async () => ((await slice())['spec'] as typeof spec).pool.generation, { timeout: 10_000 })
      .toBe(2);
    const tainted = ((await slice())['spec'] as typeof spec).devices[1];
    expect(tainted?.taints).toEqual([expect.objectContaining({ key: 'gpu.vcuda.io/unhealthy', effect: 'NoSchedule' })]);
  }, 60_000);

  it('prepares what the real scheduler allocated, refuses a status naming another device, unprepares when it is freed', async () => {
    const request = {
      name: 'gpu',
      exactly: { deviceClassName: DRIVER, capacity: { requests: { cores: '30', memory: '8000M' } } },
    };
    const made = await client.create(CLAIMS, {
      metadata: { name: 'share' },
      spec: { devices: { requests: [request] } },
    });
    await client.create(podPath('default'), {
      metadata: { name: 'p' },
      spec: {
        resourceClaims: [{ name: 'gpu', resourceClaimName: 'share' }],
        containers: [{ name: 'c', image: 'cuda' }],
      },
    });
    await expect
      .poll(async () => (await claimStatus('share'))?.['allocation'] !== undefined, { timeout: 60_000 })
      .toBe(true);
    const result = ((await claimStatus('share'))['allocation'] as { devices: { results: Record<string, unknown>[] } })
      .devices.results[0];
    // The tainted card is not used; 8000M is rounded up to the 1Mi step.
    expect(result).toMatchObject({
      pool: 'node-a',
      device: 'gpu-0',
      consumedCapacity: { cores: '30', memory: '7630Mi' },
    });
    const ref = { namespace: 'default', name: 'share', uid: made.metadata.uid as string };
    const prepared = await kubelet.prepare('v1', [ref]);
    expect(prepared.claims[ref.uid]?.error).toBe('');
    const key = real?.agent.preparer.prepared()[0]?.key as string;
    const limit = decodeLimitConfig(readFileSync(containerPaths(join(dir, 'containers'), key).configPath));
    expect(limit.devices).toEqual([
      expect.objectContaining({
        uuid: gpu.listCards()[0]?.uuid,
        coreRequest: 30,
        memoryLimitBytes: 7630 * MiB,
        mode: 'hard',
      }),
    ]);

    // A status written by hand, naming a device this node does not publish.
    const forged = await client.create(CLAIMS, {
      metadata: { name: 'forged' },
      spec: { devices: { requests: [request] } },
    });
    await client.request('PUT', `${CLAIMS}/forged/status`, {
      ...forged,
      status: {
        allocation: {
          devices: {
            results: [
              {
                request: 'gpu',
                driver: DRIVER,
                pool: 'node-a',
                device: 'gpu-7',
                shareID: '5e0c3b1a-0000-4000-8000-000000000007',
                consumedCapacity: { cores: '30', memory: '7630Mi' },
              },
            ],
          },
        },
      },
    });
    const forgedRef = { namespace: 'default', name: 'forged', uid: forged.metadata.uid as string };
    const refused = await kubelet.prepare('v1beta1', [forgedRef]);
    expect(refused.claims[forgedRef.uid]?.error).toMatch(
      /gpu-7\) names a device that is not in this node's ResourceSlice/,
    );

    // The pod ends (grace 0): the controller frees the claim; the kubelet then unprepares it.
    await deletePodNow(client, 'default', 'p');
    await expect.poll(async () => (await claimStatus('share'))?.['allocation'], { timeout: 60_000 }).toBeUndefined();
    expect((await kubelet.unprepare('v1', [ref])).claims[ref.uid]?.error).toBe('');
    expect(real?.agent.preparer.prepared()).toEqual([]);
  }, 180_000);

  it("reads the claim's opaque config as the real API server stores it: a soft limit", async () => {
    const request = {
      name: 'gpu',
      exactly: { deviceClassName: DRIVER, capacity: { requests: { cores: '20', memory: '1Gi' } } },
    };
    const parameters = { apiVersion: 'gpu.vcuda.io/v1alpha1', kind: 'GpuShareConfig', coreLimit: 60 };
    const made = await client.create(CLAIMS, {
      metadata: { name: 'soft' },
      spec: {
        devices: { requests: [request], config: [{ requests: ['gpu'], opaque: { driver: DRIVER, parameters } }] },
      },
    });
    await client.create(podPath('default'), {
      metadata: { name: 'q' },
      spec: {
        resourceClaims: [{ name: 'gpu', resourceClaimName: 'soft' }],
        containers: [{ name: 'c', image: 'cuda' }],
      },
    });
    await expect
      .poll(async () => (await claimStatus('soft'))?.['allocation'] !== undefined, { timeout: 60_000 })
      .toBe(true);
    const ref = { namespace: 'default', name: 'soft', uid: made.metadata.uid as string };
    expect((await kubelet.prepare('v1', [ref])).claims[ref.uid]?.error).toBe('');
    const key = real?.agent.preparer.prepared().find((c) => c.name === 'soft')?.key as string;
    const limit = decodeLimitConfig(readFileSync(containerPaths(join(dir, 'containers'), key).configPath));
    expect(limit.devices).toEqual([
      expect.objectContaining({ mode: 'soft', coreRequest: 20, coreLimit: 60, memoryLimitBytes: 1024 * MiB }),
    ]);
    await deletePodNow(client, 'default', 'q');
    expect((await kubelet.unprepare('v1', [ref])).claims[ref.uid]?.error).toBe('');
  }, 120_000);
});
