/**
 * Local mode as a 1.36 cluster: the API server serves `resource.k8s.io/v1`, the scheduler
 * allocates a pod's claim on the node whose slice has room (a driver no node agent serves here,
 * so the kubelet holds the pod at Prepare: this is the control side alone), a claim that fits
 * nowhere leaves its pod unschedulable with kube-scheduler's reason, and deleting the pod frees
 * the claim through the resourceclaim controller.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';

const GV = '/apis/resource.k8s.io/v1';
const NS = 'dra';
const DRIVER = 'test.sim.vcuda.io';
const CLAIMS = `${GV}/namespaces/${NS}/resourceclaims`;

const claimFor = (name: string, cores: string) => ({
  metadata: { name },
  spec: {
    devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: DRIVER, capacity: { requests: { cores } } } }] },
  },
});
const podFor = (name: string) => ({
  metadata: { name },
  spec: { resourceClaims: [{ name: 'gpu', resourceClaimName: name }], containers: [{ name: 'c', image: 'cuda' }] },
});

describe('vcuda local as a 1.36 cluster: DRA claims allocated and freed', () => {
  let lc: LocalCluster;

  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({ name: 'dra', nodes: [{ namePrefix: 'node', count: 2, cards: 1, memoryMiB: 16384 }] }),
      logLevel: 'silent',
      kubernetesVersion: '1.36',
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
    await lc.client.create(`${GV}/deviceclasses`, {
      metadata: { name: DRIVER },
      spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] },
    });
    const policy = { default: '100', validRange: { min: '1', max: '100', step: '1' } };
    await lc.client.create(`${GV}/resourceslices`, {
      metadata: { name: `node-1-${DRIVER}` },
      spec: {
        driver: DRIVER,
        nodeName: 'node-1',
        pool: { name: 'node-1', generation: 1, resourceSliceCount: 1 },
        devices: [
          {
            name: 'card-0',
            allowMultipleAllocations: true,
            capacity: { cores: { value: '100', requestPolicy: policy } },
          },
        ],
      },
    });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  it('allocates a share on the node that has the device, refuses one that fits nowhere, frees it when the pod goes', async () => {
    await lc.client.create(CLAIMS, claimFor('share', '30'));
    await lc.client.create(podPath(NS), podFor('share'));
    await expect
      .poll(async () => ((await lc.client.get(podPath(NS, 'share')))['spec'] as { nodeName?: string }).nodeName, {
        timeout: 30_000,
      })
      .toBe('node-1');
    const claim: KubeObj = await lc.client.get(`${CLAIMS}/share`);
    expect(claim['status']).toMatchObject({
      allocation: { devices: { results: [{ device: 'card-0', pool: 'node-1', consumedCapacity: { cores: '30' } }] } },
      reservedFor: [{ resource: 'pods', name: 'share' }],
    });

    await lc.client.create(CLAIMS, claimFor('too-big', '80'));
    await lc.client.create(podPath(NS), podFor('too-big'));
    await expect
      .poll(
        async () =>
          ((await lc.client.get(podPath(NS, 'too-big')))['status'] as { conditions?: { message?: string }[] })
            .conditions?.[0]?.message,
        {
          timeout: 30_000,
        },
      )
      .toBe('0/2 nodes are available: 2 cannot allocate all claims.');

    await lc.client.request('DELETE', podPath(NS, 'share'), { gracePeriodSeconds: 0 });
    await expect
      .poll(async () => (await lc.client.get(`${CLAIMS}/share`))['status'] ?? {}, { timeout: 30_000 })
      .toEqual({});
    // With the share gone, the waiting pod's claim fits.
    await expect
      .poll(async () => ((await lc.client.get(podPath(NS, 'too-big')))['spec'] as { nodeName?: string }).nodeName, {
        timeout: 30_000,
      })
      .toBe('node-1');
  }, 120_000);
});
