/**
 * The simulated kubelet's DRA manager with the node agent in DRA mode, on the simulated API server
 * playing 1.36: the agent's slice reaches the API server, the kubelet finds the driver through
 * plugins_registry, a pod's claim is prepared before its container starts (which then runs with
 * libvcuda, the claim's limit file and its card), and unprepared when the pod is deleted.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeLimitConfig } from '../../contract/index.js';
import { containerPaths } from '../../node-agent/limits/container-files.js';
import { startWiredDraAgent } from '../../node-agent/wiring.js';
import { draAgentConfig } from '../../test/support/node-agent/dra-harness.js';
import { FakeGpuSource } from '../../test/support/node-agent/fake-gpu-source.js';
import { recordingLog } from '../../test/support/node-agent/recording-log.js';
import { type SimApiServer, startApiServer } from '../apiserver/api-server.js';
import { KubeClient, podPath } from '../kube-client.js';
import { kubeConfigFor } from '../kubeconfig.js';
import { containerCdiDevices } from './dra-manager.js';
import { type SimKubelet, startKubelet } from './sim-kubelet.js';

const GiB = 1024 ** 3;
const CLAIMS = '/apis/resource.k8s.io/v1/namespaces/default/resourceclaims';

describe('containerCdiDevices', () => {
  it('gives each container the devices of the claims (and requests) it names', () => {
    const devices = new Map([
      [
        'gpus',
        [
          { request_names: ['a'], pool_name: 'n1', device_name: 'gpu-0', cdi_device_ids: ['x/claim=k-gpu-0'] },
          { request_names: ['b'], pool_name: 'n1', device_name: 'gpu-1', cdi_device_ids: ['x/claim=k-gpu-1'] },
        ],
      ],
    ]);
    const containers = [
      { name: 'all', resources: { claims: [{ name: 'gpus' }] } },
      { name: 'only-b', resources: { claims: [{ name: 'gpus', request: 'b' }] } },
      { name: 'none' },
    ];
    expect(containerCdiDevices(containers, devices)).toEqual(
      new Map([
        ['all', ['x/claim=k-gpu-0', 'x/claim=k-gpu-1']],
        ['only-b', ['x/claim=k-gpu-1']],
      ]),
    );
  });
});

describe('simulated kubelet with the node agent as a DRA driver', () => {
  let dir: string;
  let api: SimApiServer;
  let client: KubeClient;
  let kubelet: SimKubelet;
  let agent: Awaited<ReturnType<typeof startWiredDraAgent>>;
  let gpu: FakeGpuSource;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sim-dra-'));
    api = await startApiServer({ kubernetesVersion: '1.36' });
    client = new KubeClient(api.url);
    kubelet = await startKubelet({
      client,
      nodeName: 'n1',
      root: join(dir, 'kubelet'),
      runtime: { baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' }, cdiSpecDirs: [join(dir, 'cdi')] },
      maxGraceMs: 200,
      preStartRetryMs: 100,
    });
    const config = draAgentConfig(dir, {
      nodeName: 'n1',
      dra: { pluginsRegistryDir: kubelet.dra.registryDir, pluginsDir: kubelet.dra.pluginsDir },
    });
    gpu = new FakeGpuSource({ cards: 2, memoryMiB: 81920 });
    agent = await startWiredDraAgent(config, { kubeConfig: kubeConfigFor(api.url), gpu, log: recordingLog().log });
  });
  afterEach(async () => {
    await kubelet.close();
    await agent.stop();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('publishes the slice, registers, prepares a claim before the container starts and unprepares it when the pod goes', async () => {
    const slices = await client.list('/apis/resource.k8s.io/v1/resourceslices');
    const spec = slices.items[0]?.['spec'] as { nodeName: string; devices: { name: string; capacity: object }[] };
    expect(spec.nodeName).toBe('n1');
    expect(spec.devices.map((d) => d.name)).toEqual(['gpu-0', 'gpu-1']);
    await expect.poll(() => kubelet.dra.driverNames(), { timeout: 5000 }).toEqual(['gpu.vcuda.io']);
    await expect.poll(() => agent.agent.healthProblems(), { timeout: 5000 }).toEqual([]);

    const request = {
      name: 'gpu',
      exactly: { deviceClassName: 'gpu.vcuda.io', capacity: { requests: { cores: '30', memory: '8Gi' } } },
    };
    const claim = await client.create(CLAIMS, { metadata: { name: 'c1' }, spec: { devices: { requests: [request] } } });
    const pod = await client.create(podPath('default', ''), {
      metadata: { name: 'p1' },
      spec: {
        nodeName: 'n1',
        resourceClaims: [{ name: 'gpu', resourceClaimName: 'c1' }],
        containers: [
          {
            name: 'main',
            image: 'x:1',
            command: ['sh', '-c', 'echo "$LD_PRELOAD|$NVIDIA_VISIBLE_DEVICES|$VCUDA_CONFIG"; sleep 600'],
            resources: { claims: [{ name: 'gpu' }] },
          },
        ],
      },
    });
    const phase = async () => ((await client.get(podPath('default', 'p1'))).status as { phase?: string })?.phase;
    // Not allocated yet: the pod waits, ContainerCreating.
    await expect
      .poll(async () => JSON.stringify((await client.get(podPath('default', 'p1'))).status), { timeout: 5000 })
      .toMatch(/ResourceClaim default\/c1 is not allocated/);
    // The scheduler's allocation and reservation, in one status write.
    await client.request('PUT', `${CLAIMS}/c1/status`, {
      ...claim,
      status: {
        allocation: {
          devices: {
            results: [
              {
                request: 'gpu',
                driver: 'gpu.vcuda.io',
                pool: 'n1',
                device: 'gpu-1',
                shareID: '3f1e2d4c-0000-4000-8000-000000000001',
                consumedCapacity: { cores: '30', memory: '8Gi' },
              },
            ],
          },
        },
        reservedFor: [{ resource: 'pods', name: 'p1', uid: pod.metadata.uid }],
      },
    });
    await expect.poll(phase, { timeout: 5000 }).toBe('Running');
    const prepared = agent.agent.preparer.prepared();
    expect(prepared.map((c) => c.name)).toEqual(['c1']);
    const paths = containerPaths(join(dir, 'containers'), prepared[0]?.key as string);
    expect(decodeLimitConfig(readFileSync(paths.configPath)).devices).toEqual([
      expect.objectContaining({ hostIndex: 1, coreRequest: 30, memoryLimitBytes: 8 * GiB, mode: 'hard' }),
    ]);
    const log = join(dir, 'kubelet', 'logs', `${pod.metadata.uid}-main.log`);
    await expect.poll(() => (existsSync(log) ? readFileSync(log, 'utf8') : ''), { timeout: 5000 }).toContain('|');
    // ld.so's complaints that the made-up libvcuda.so path does not exist come around the line.
    const line = readFileSync(log, 'utf8')
      .split('\n')
      .find((l) => !l.startsWith('ERROR') && l.includes('|'));
    const [preload, visible, config] = (line ?? '').split('|');
    expect(preload).toBe(join(dir, 'libvcuda.so'));
    expect(visible).toBe(gpu.listCards()[1]?.uuid);
    expect(config).not.toBe('/etc/vcuda/vcuda.conf'); // translated to the host (the runtime's mirror of it)
    const limit = decodeLimitConfig(readFileSync(paths.configPath));
    expect(decodeLimitConfig(readFileSync(config as string)).devices).toEqual(limit.devices);

    await client.request('DELETE', podPath('default', 'p1'), {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      gracePeriodSeconds: 0,
    });
    await expect.poll(() => agent.agent.preparer.prepared().length, { timeout: 5000 }).toBe(0);
    expect(existsSync(paths.dir)).toBe(false);
    // The kubelet forgets the claim once the driver's answer is back, just after the agent let go of it.
    await expect.poll(() => kubelet.dra.preparedClaims(), { timeout: 5000 }).toEqual([]);
  });
});
