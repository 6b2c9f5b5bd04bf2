/**
 * Local mode as a 1.36 cluster, end to end through the node side: each node agent is a DRA driver,
 * so `resourceslices` list every fake card with `cores` and `memory`; a pod with a claim
 * `{cores: "30", memory: 8Gi}` is allocated by the scheduler, prepared by the kubelet through the
 * agent's plugin, and its CUDA program stops at 8 GiB; the claim shows consumedCapacity and a
 * shareID; when the pod ends the controller frees the claim and the kubelet unprepares it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { inThisProcess } from '../../sim/node/local-node.js';
import { buildWorkloads, phaseOf } from './e2e-helpers.js';

const GV = '/apis/resource.k8s.io/v1';
const NS = 'dra-node';
const DRIVER = 'gpu.vcuda.io';
const CLAIMS = `${GV}/namespaces/${NS}/resourceclaims`;

describe('vcuda local as a 1.36 cluster: node agents as DRA drivers', () => {
  let lc: LocalCluster;
  let canRunCuda = false;

  beforeAll(async () => {
    canRunCuda = buildWorkloads();
    lc = await startLocalCluster({
      cluster: parseClusterSpec({ name: 'dran', nodes: [{ namePrefix: 'gpu', count: 1, cards: 2, memoryMiB: 16384 }] }),
      logLevel: 'silent',
      kubernetesVersion: '1.36',
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
    await lc.client.create(`${GV}/deviceclasses`, {
      metadata: { name: DRIVER },
      spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] },
    });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  it('lists every card with cores and memory in the node slices', async () => {
    const slices = async () => (await lc.client.list(`${GV}/resourceslices`)).items;
    await expect.poll(async () => (await slices()).length, { timeout: 20_000 }).toBe(1);
    const [slice] = await slices();
    const spec = slice?.['spec'] as {
      driver: string;
      nodeName: string;
      devices: { name: string; allowMultipleAllocations: boolean; capacity: Record<string, { value: string }> }[];
    };
    expect(spec.driver).toBe(DRIVER);
    expect(spec.nodeName).toBe('gpu-0');
    expect(spec.devices.map((d) => [d.name, d.allowMultipleAllocations, d.capacity['cores']?.value])).toEqual([
      ['gpu-0', true, '100'],
      ['gpu-1', true, '100'],
    ]);
    expect(spec.devices[0]?.capacity['memory']?.value).toBe('16Gi');
  }, 60_000);

  it('publishes the node inventory as in device-plugin mode, so the ledger learns its cards', async () => {
    // The control plane registers a node's cards in the ledger from this annotation; the charge of
    // a claim names its card by index, and without it every allocation would be refused.
    const inventory = async () => {
      const node = await lc.client.get('/api/v1/nodes/gpu-0');
      const text = (node['metadata'] as { annotations?: Record<string, string> }).annotations?.['vcuda.io/inventory'];
      return text ? (JSON.parse(text) as { cards: { index: number }[] }).cards.map((c) => c.index) : [];
    };
    await expect.poll(inventory, { timeout: 20_000 }).toEqual([0, 1]);
  }, 60_000);

  it("runs a pod's CUDA program under its claim's memory limit and frees the claim when the pod ends", async (ctx) => {
    if (!canRunCuda) ctx.skip();
    const request = {
      name: 'gpu',
      exactly: { deviceClassName: DRIVER, capacity: { requests: { cores: '30', memory: '8Gi' } } },
    };
    await lc.client.create(CLAIMS, { metadata: { name: 'share' }, spec: { devices: { requests: [request] } } });
    const pod = await lc.client.create(podPath(NS), {
      metadata: { name: 'greedy' },
      spec: {
        restartPolicy: 'Never',
        resourceClaims: [{ name: 'gpu', resourceClaimName: 'share' }],
        containers: [
          {
            name: 'main',
            image: 'vcuda-sim/workload:1',
            command: ['cuda-workload', '--alloc-mib', '12000', '--chunk-mib', '512', '--hold-seconds', '2'],
            resources: { claims: [{ name: 'gpu' }] },
          },
        ],
      },
    });
    // While the program holds its memory, the claim is allocated, reserved and prepared.
    await expect.poll(() => phaseOf(lc.client, NS, 'greedy'), { timeout: 30_000 }).toBe('Running');
    const claim = await lc.client.get(`${CLAIMS}/share`);
    const result = (claim['status'] as { allocation: { devices: { results: Record<string, unknown>[] } } }).allocation
      .devices.results[0];
    expect(result).toMatchObject({ driver: DRIVER, pool: 'gpu-0', consumedCapacity: { cores: '30', memory: '8Gi' } });
    expect(result?.['shareID']).toMatch(/^[0-9a-f-]{36}$/);
    const agent = inThisProcess(lc.nodes[0]!).draAgent()!;
    expect(agent.preparer.prepared().map((c) => c.name)).toEqual(['share']);

    await expect.poll(() => phaseOf(lc.client, NS, 'greedy'), { timeout: 30_000 }).toBe('Failed');
    const { text: log } = await lc.client.getText(`${podPath(NS, 'greedy')}/log?container=main`);
    expect(log).toContain('total_mib=8192');
    expect(log).toContain('result=out-of-memory');
    // 512 MiB chunks up to the limit, less the context libvcuda charges: the program stops below 8 GiB.
    const allocated = Number(/allocated_mib=(\d+)/.exec(log)?.[1]);
    expect(allocated).toBeLessThanOrEqual(8192);
    expect(allocated).toBeGreaterThan(8192 - 1024);
    expect(pod.metadata.uid).toBeDefined();
    // The pod ended: the resourceclaim controller frees the claim, the kubelet unprepares it.
    await expect
      .poll(async () => (await lc.client.get(`${CLAIMS}/share`))['status'] ?? {}, { timeout: 30_000 })
      .toEqual({});
    await expect.poll(() => agent.preparer.prepared().length, { timeout: 10_000 }).toBe(0);
  }, 120_000);
});
