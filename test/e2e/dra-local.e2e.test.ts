/**
 * Local mode as a 1.36 cluster. The control side alone (a driver no node agent serves, so the
 * kubelet holds the pod at Prepare): the scheduler allocates a pod's claim on the node whose slice
 * has room, a claim that fits nowhere leaves its pod unschedulable with kube-scheduler's reason,
 * deleting the pod frees the claim and lets the waiting one in. `vcuda local --dra`: a 1.36
 * cluster with vcuda's DeviceClass, every fake card in its node agent's slice (the node side end
 * to end, a claim's program stopped at its limit, is `dra-node.e2e.test.ts`).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
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

describe('vcuda local --dra', () => {
  it('claims 1.36, lists every fake card in the slices of node agents in their own processes, and stops on SIGINT', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-local-dra-'));
    writeFileSync(join(dir, 'cluster.yaml'), 'nodes:\n  - { count: 2, cards: 2 }\n');
    const args = ['local', '--dra', '--node-processes', '--port', '0', '--cluster', join(dir, 'cluster.yaml')];
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'vcuda.js'), ...args, '--data-dir', join(dir, 'ledger')], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await expect.poll(() => /ready in/.test(output), { timeout: 90_000, interval: 250 }).toBe(true);
      expect(output).toContain('kubectl get resourceslices');
      const kubeconfig = parseYaml(readFileSync(/kubeconfig\s+(\/\S+kubeconfig)/.exec(output)![1]!, 'utf8'));
      const server: string = kubeconfig.clusters[0].cluster.server;
      const caPem = Buffer.from(kubeconfig.clusters[0].cluster['certificate-authority-data'], 'base64').toString();
      const admin = new KubeClient(server, { token: kubeconfig.users[0].user.token, caPem });
      expect(await admin.get('/version')).toMatchObject({ major: '1', minor: '36' });
      expect((await admin.list(`${GV}/deviceclasses`)).items.map((c) => c.metadata.name)).toEqual([
        'gpu.vcuda.io',
        'mig.gpu.vcuda.io',
      ]);
      const devices = async () =>
        (await admin.list(`${GV}/resourceslices`)).items
          .flatMap((s) => {
            const spec = s['spec'] as {
              nodeName: string;
              devices: { name: string; capacity: Record<string, unknown> }[];
            };
            return spec.devices.map((d) => `${spec.nodeName}/${d.name} ${Object.keys(d.capacity).sort().join(',')}`);
          })
          .sort();
      await expect
        .poll(devices, { timeout: 30_000 })
        .toEqual([
          'gpu-node-0/gpu-0 cores,memory',
          'gpu-node-0/gpu-1 cores,memory',
          'gpu-node-1/gpu-0 cores,memory',
          'gpu-node-1/gpu-1 cores,memory',
        ]);
    } finally {
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);
});
