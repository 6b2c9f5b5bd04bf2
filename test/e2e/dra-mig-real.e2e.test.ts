/**
 * MIG partitions end to end against the real control plane v1.36 (`../shared/kubernetes-1.36/`; no
 * kubelet, so the test calls the plugin's sockets as the kubelet would): the real node agent in DRA
 * mode with its card kept for dynamic MIG, over native/'s fake NVML with one H100 in MIG mode, publishes its
 * partitions and counter set through the API client and the real kube-apiserver accepts them;
 * kube-scheduler allocates two 3g.40gb claims on placements that do not overlap and leaves a third
 * unallocated; Prepare creates each instance on the card and hands it over, and when the pods end
 * and the claims are freed, Unprepare destroys them. Skipped, saying why, without that directory
 * or without the fake driver built.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { draMigProfileSelector } from '../../contract/index.js';
import { claimCdiSpecPath } from '../../node-agent/dra/claim-cdi.js';
import { NvmlGpuSource } from '../../node-agent/nvml/nvml-gpu-source.js';
import { type KubeClient, podPath } from '../../sim/kube-client.js';
import { installDeviceClass } from '../../sim/local-cluster.js';
import { claimTemplateOf } from '../../webhooks/pod-claims.js';
import { deletePodNow } from '../support/dra-node-tier.js';
import type { DraKubeletClient } from '../support/node-agent/dra-harness.js';
import { real136SkipReason } from '../support/real-control-plane-136.js';
import { type RealDraNode, startRealDraNode } from '../support/real-dra-node.js';

const native = join(dirname(fileURLToPath(import.meta.url)), '../../native/build/fake');
const lib = join(native, 'libnvidia-ml.so.1');
const skipReason =
  real136SkipReason('real kube-apiserver + kube-scheduler + kube-controller-manager v1.36') ??
  (existsSync(lib) ? undefined : `${lib} not built (make -C native)`);
if (skipReason) console.warn(`dra-mig-real: skipped: ${skipReason}`);

const GV = '/apis/resource.k8s.io/v1';
const DRIVER = 'gpu.vcuda.io';
const CLAIMS = `${GV}/namespaces/default/resourceclaims`;

type Result = { device: string; pool: string; shareID?: string };

describe.skipIf(skipReason !== undefined)('MIG partitions of the DRA node agent on the real 1.36 control plane', () => {
  let real: RealDraNode | undefined;
  let client: KubeClient;
  let dir: string;
  let kubelet: DraKubeletClient;
  let nvml: NvmlGpuSource;
  const env = { FAKEGPU_DEVICES: '81559', FAKEGPU_MIG: '0', FAKEGPU_STATE: '' };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dra-mig-real-'));
    env.FAKEGPU_STATE = join(dir, 'fakegpu.state');
    Object.assign(process.env, env);
    nvml = new NvmlGpuSource({ libraryPath: lib, sysfsRoot: dir });
    real = await startRealDraNode({
      nodeName: 'node-m',
      dir,
      gpu: new NvmlGpuSource({ libraryPath: lib, sysfsRoot: dir }),
      config: { mig: { dynamicCards: [0], checkpointPath: join(dir, 'dynamic-mig.json') } },
      // The overlay's DeviceClasses, as shipped: cards, and MIG partitions.
      createDeviceClasses: installDeviceClass,
    });
    client = real.client;
    kubelet = real.kubelet;
  }, 300_000);

  afterAll(async () => {
    await real?.close();
    nvml?.close();
    for (const k of Object.keys(env)) delete process.env[k];
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  const instances = () => nvml.migLayout(0)?.instances.map((i) => `${i.profile}@${i.placement.start}`) ?? [];
  const allocation = async (name: string) =>
    (
      (await client.get(`${CLAIMS}/${name}`))['status'] as
        | { allocation?: { devices: { results: Result[] } } }
        | undefined
    )?.allocation;

  it('is accepted, allocated without overlap, and each instance made at Prepare and destroyed at Unprepare', async () => {
    const slices = (await client.list(`${GV}/resourceslices`)).items;
    const spec = (s: (typeof slices)[number]) =>
      s['spec'] as { devices?: { name: string }[]; sharedCounters?: { name: string }[] };
    expect(slices.flatMap((s) => spec(s).sharedCounters ?? []).map((c) => c.name)).toEqual(['gpu-0-counters']);
    // A free H100: every profile at every legal placement.
    expect(slices.flatMap((s) => spec(s).devices ?? []).length).toBe(1 + 1 + 2 + 3 + 4 + 7 + 7);

    const names = ['train-a', 'train-b', 'train-c'];
    const refs = new Map<string, { namespace: string; name: string; uid: string }>();
    for (const name of names) {
      const request = {
        name: 'mig',
        exactly: {
          deviceClassName: `mig.${DRIVER}`,
          selectors: [{ cel: { expression: draMigProfileSelector(DRIVER, '3g.40gb') } }],
        },
      };
      const made = await client.create(CLAIMS, { metadata: { name }, spec: { devices: { requests: [request] } } });
      refs.set(name, { namespace: 'default', name, uid: made.metadata.uid as string });
      await client.create(podPath('default'), {
        metadata: { name },
        spec: {
          resourceClaims: [{ name: 'mig', resourceClaimName: name }],
          containers: [{ name: 'c', image: 'cuda', resources: { claims: [{ name: 'mig' }] } }],
        },
      });
    }
    await expect.poll(async () => (await allocation('train-b')) !== undefined, { timeout: 60_000 }).toBe(true);
    await expect.poll(async () => (await allocation('train-a')) !== undefined, { timeout: 60_000 }).toBe(true);
    const devices = await Promise.all(
      ['train-a', 'train-b'].map(async (n) => (await allocation(n))?.devices.results[0]),
    );
    expect(devices.map((r) => r?.device).sort()).toEqual(['gpu-0-mig-3g-40gb-0', 'gpu-0-mig-3g-40gb-4']);
    expect(devices.every((r) => r?.pool === 'node-m' && r.shareID === undefined)).toBe(true);
    // The third cannot fit: the card's memory slices are all held.
    await expect
      .poll(
        async () => {
          const pod = await client.get(podPath('default', 'train-c'));
          const conditions = (pod['status'] as { conditions?: { type: string; reason?: string }[] }).conditions ?? [];
          return conditions.find((c) => c.type === 'PodScheduled')?.reason;
        },
        { timeout: 30_000 },
      )
      .toBe('Unschedulable');
    expect(await allocation('train-c')).toBeUndefined();

    // Prepare makes each instance where the scheduler put it and hands it over.
    const prepared = await kubelet.prepare('v1', [refs.get('train-a')!, refs.get('train-b')!]);
    expect(Object.values(prepared.claims).map((c) => c.error)).toEqual(['', '']);
    expect(instances().sort()).toEqual(['3g.40gb@0', '3g.40gb@4']);
    const claim = real!.agent.preparer.prepared().find((c) => c.name === 'train-a');
    const cdi = JSON.parse(readFileSync(claimCdiSpecPath(join(dir, 'cdi'), DRIVER, claim!.key), 'utf8'));
    expect(cdi.containerEdits.env).toContain(`NVIDIA_VISIBLE_DEVICES=${claim!.mig?.[0]?.uuid}`);

    // The pods end, the controller frees the claims, the kubelet unprepares them: the instances go.
    for (const name of names) await deletePodNow(client, 'default', name);
    await expect
      .poll(async () => (await allocation('train-a')) ?? (await allocation('train-b')), { timeout: 60_000 })
      .toBeUndefined();
    const unprepared = await kubelet.unprepare('v1', [refs.get('train-a')!, refs.get('train-b')!]);
    expect(Object.values(unprepared.claims).map((c) => c.error)).toEqual(['', '']);
    expect(instances()).toEqual([]);
  }, 240_000);

  it('allocates a MIG partition from the template a pod written for the extender is converted to', async () => {
    // What the mutating hook makes of `nvidia.com/mig-3g.40gb: 1` on a DRA cluster (pod-claims.ts).
    const request = {
      name: 'c',
      isInit: false,
      corePerCard: 100,
      cards: 1,
      memoryMiBPerCard: undefined,
      coreLimit: 100,
      mode: 'hard' as const,
      mig: '3g.40gb',
    };
    const template = claimTemplateOf(request, 'default', {
      deviceClassName: DRIVER,
      driverName: DRIVER,
      modeValue: 'dra',
    });
    await client.create(`${GV}/namespaces/default/resourceclaimtemplates`, template);
    await client.create(podPath('default'), {
      metadata: { name: 'converted' },
      spec: {
        resourceClaims: [{ name: 'vcuda-c', resourceClaimTemplateName: template.metadata.name }],
        containers: [{ name: 'c', image: 'cuda', resources: { claims: [{ name: 'vcuda-c' }] } }],
      },
    });
    // The resourceclaim controller makes the pod's claim from the template; kube-scheduler allocates it.
    const claimOfPod = async () =>
      (await client.list(CLAIMS)).items.find((c) =>
        ((c.metadata as { ownerReferences?: { name: string }[] }).ownerReferences ?? []).some(
          (o) => o.name === 'converted',
        ),
      );
    await expect
      .poll(async () => ((await claimOfPod())?.['status'] as { allocation?: unknown } | undefined)?.allocation, {
        timeout: 60_000,
      })
      .toBeDefined();
    const allocated = (await claimOfPod())?.['status'] as { allocation: { devices: { results: Result[] } } };
    expect(allocated.allocation.devices.results.map((r) => r.device)).toEqual([
      expect.stringMatching(/^gpu-0-mig-3g-40gb-[04]$/),
    ]);
    await deletePodNow(client, 'default', 'converted');
  }, 120_000);
});
