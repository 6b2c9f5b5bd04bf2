import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseProcCgroup } from '../../node-agent/card-sampling/cgroup-identity.js';
import {
  DevicePluginService,
  PodResourcesListerService,
  RegistrationService,
  unixTarget,
} from '../../node-agent/kubelet/grpc-services.js';
import { type SimApiServer, startApiServer } from '../apiserver/api-server.js';
import { KubeClient, podPath } from '../kube-client.js';
import { writeKubeconfig } from '../kubeconfig.js';
import { type SimKubelet, startKubelet } from './sim-kubelet.js';

const RESOURCE = 'example.com/widget';
const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

/**
 * A minimal device plugin: 4 widgets; Allocate hands out env naming the IDs and a mounted file
 * path. With `preStart`, it asks for PreStartContainer and answers each call when that resolves.
 */
async function startPlugin(pluginDir: string, hostDir: string, preStart?: (ids: string[]) => Promise<void>) {
  const allocations: string[][] = [];
  const server = new grpc.Server();
  server.addService(DevicePluginService.service, {
    GetDevicePluginOptions: (_c: unknown, cb: grpc.sendUnaryData<object>) =>
      cb(null, { pre_start_required: Boolean(preStart), get_preferred_allocation_available: false }),
    ListAndWatch: (call: grpc.ServerWritableStream<object, object>) => {
      call.write({ devices: ['w0', 'w1', 'w2', 'w3'].map((ID) => ({ ID, health: 'Healthy' })) });
    },
    Allocate: (
      call: grpc.ServerUnaryCall<{ container_requests: { devices_ids: string[] }[] }, object>,
      cb: grpc.sendUnaryData<object>,
    ) => {
      const ids = call.request.container_requests[0]!.devices_ids;
      allocations.push(ids);
      cb(null, {
        container_responses: [
          {
            envs: { WIDGET_IDS: ids.join(','), LIMIT_FILE: '/vcuda/limits.bin' },
            mounts: [{ container_path: '/vcuda', host_path: hostDir, read_only: true }],
            devices: [],
            annotations: {},
          },
        ],
      });
    },
    GetPreferredAllocation: (_c: unknown, cb: grpc.sendUnaryData<object>) => cb(null, { container_responses: [] }),
    PreStartContainer: (c: grpc.ServerUnaryCall<{ devices_ids: string[] }, object>, cb: grpc.sendUnaryData<object>) =>
      void (preStart ?? (async () => {}))(c.request.devices_ids).then(
        () => cb(null, {}),
        (e: Error) => cb({ code: grpc.status.FAILED_PRECONDITION, details: e.message }),
      ),
  });
  await new Promise<void>((res, rej) =>
    server.bindAsync(unixTarget(join(pluginDir, 'widget.sock')), grpc.ServerCredentials.createInsecure(), (e) =>
      e ? rej(e) : res(),
    ),
  );
  const reg = new RegistrationService(unixTarget(join(pluginDir, 'kubelet.sock')), grpc.credentials.createInsecure());
  await new Promise<void>((res, rej) =>
    (reg as unknown as { Register: (r: object, cb: (e: Error | null) => void) => void }).Register(
      { version: 'v1beta1', endpoint: 'widget.sock', resource_name: RESOURCE, options: {} },
      (e) => (e ? rej(e) : res()),
    ),
  );
  reg.close();
  return { allocations, close: () => server.forceShutdown() };
}

describe('simulated kubelet', () => {
  let dir: string;
  let api: SimApiServer;
  let client: KubeClient;
  let kubelet: SimKubelet;
  let plugin: Awaited<ReturnType<typeof startPlugin>>;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sim-kubelet-'));
    api = await startApiServer();
    client = new KubeClient(api.url);
    kubelet = await startKubelet({
      client,
      nodeName: 'n1',
      root: join(dir, 'kubelet'),
      runtime: { baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } },
      maxGraceMs: 200,
    });
    plugin = await startPlugin(kubelet.pluginDir, join(dir, 'host'));
  });
  afterEach(async () => {
    await kubelet.close();
    plugin.close();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const phase = async (name: string) =>
    ((await client.get(podPath('default', name))).status as { phase: string }).phase;
  const allocatableWidgets = async () =>
    ((await client.get('/api/v1/nodes/n1')).status as { allocatable: Record<string, string> }).allocatable[RESOURCE];
  const pod = (name: string, widgets: number, command: string[], restartPolicy = 'Always') => ({
    metadata: { name },
    spec: {
      nodeName: 'n1',
      restartPolicy,
      containers: [{ name: 'main', image: 'x:1', command, resources: { limits: { [RESOURCE]: String(widgets) } } }],
    },
  });
  const listPodResources = () => {
    const c = new PodResourcesListerService(unixTarget(kubelet.podResourcesSocket), grpc.credentials.createInsecure());
    return new Promise<{ pod_resources: { name: string; containers: { devices: { device_ids: string[] }[] }[] }[] }>(
      (res, rej) =>
        (c as unknown as { List: (r: object, cb: (e: Error | null, v: never) => void) => void }).List({}, (e, v) => {
          c.close();
          return e ? rej(e) : res(v);
        }),
    );
  };

  it('registers its node with standard labels and the plugin devices in capacity', async () => {
    const node = await client.get('/api/v1/nodes/n1');
    expect(node.metadata.labels?.['kubernetes.io/hostname']).toBe('n1');
    await expect.poll(allocatableWidgets).toBe('4');
  });

  it('allocates, runs the container with the translated env, reports PodResources, and frees everything on delete', async () => {
    await expect.poll(allocatableWidgets).toBe('4');
    const created = await client.create(
      podPath('default'),
      pod('p', 2, ['sh', '-c', 'echo "$WIDGET_IDS $LIMIT_FILE"; exec sleep 30']),
    );
    await expect.poll(() => phase('p')).toBe('Running');
    const log = join(dir, 'kubelet', 'logs', `${created.metadata.uid}-main.log`);
    await expect.poll(() => readFileSync(log, 'utf8').trim()).toBe(`w0,w1 ${join(dir, 'host')}/limits.bin`);
    expect((await listPodResources()).pod_resources).toEqual([
      expect.objectContaining({
        name: 'p',
        containers: [expect.objectContaining({ devices: [expect.objectContaining({ device_ids: ['w0', 'w1'] })] })],
      }),
    ]);
    const pid = kubelet.processes().get(created.metadata.uid!)!.get('main')!;
    await client.delete(podPath('default', 'p'));
    await expect.poll(async () => (await client.list('/api/v1/namespaces/default/pods')).items.length).toBe(0);
    expect(() => process.kill(pid, 0)).toThrow();
    expect((await listPodResources()).pod_resources).toEqual([]);
  });

  it('fails a pod whose devices are not there with the kubelet admission error', async () => {
    await expect.poll(allocatableWidgets).toBe('4');
    await client.create(podPath('default'), pod('greedy', 5, ['sleep', '30']));
    await expect.poll(() => phase('greedy')).toBe('Failed');
    const status = (await client.get(podPath('default', 'greedy'))).status as { reason: string; message: string };
    expect(status.reason).toBe('UnexpectedAdmissionError');
    expect(status.message).toContain('Requested: 5, Available: 4');
  });

  it('ends a restartPolicy Never pod Failed with its exit code, start and finish times and container id', async () => {
    const before = Date.now() - 1000;
    await client.create(podPath('default'), pod('crash', 0, ['sh', '-c', 'sleep 1; exit 3'], 'Never'));
    await expect.poll(() => phase('crash'), { timeout: 5000 }).toBe('Failed');
    const status = (await client.get(podPath('default', 'crash'))).status as {
      containerStatuses: {
        containerID: string;
        state: { terminated: { exitCode: number; startedAt: string; finishedAt: string; containerID: string } };
      }[];
    };
    const [c] = status.containerStatuses;
    const t = c!.state.terminated;
    expect(t.exitCode).toBe(3);
    // kubectl describe prints these; unset they read "Mon, 01 Jan 0001".
    expect(t.startedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Date.parse(t.startedAt)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(Date.parse(t.finishedAt)).toBeGreaterThan(Date.parse(t.startedAt));
    expect(t.containerID).toMatch(/^containerd:\/\/[0-9a-f]{64}$/);
    expect(c!.containerID).toBe(t.containerID);
    if (!hasKubectl) return; // the status above is what kubectl reads; skipped visibly below
    const kubeconfig = join(dir, 'kubeconfig');
    writeKubeconfig(kubeconfig, api.url);
    // Asynchronous: the API server answers from this very process.
    const described = (
      await promisify(execFile)('kubectl', ['--kubeconfig', kubeconfig, 'describe', 'pod', 'crash'], {
        encoding: 'utf8',
      })
    ).stdout;
    const year = String(new Date(t.startedAt).getFullYear());
    expect(described).toMatch(new RegExp(`Started:\\s+\\w{3}, \\d\\d \\w{3} ${year} `));
    expect(described).toMatch(new RegExp(`Finished:\\s+\\w{3}, \\d\\d \\w{3} ${year} `));
    expect(described).not.toContain('0001');
  });

  it.skipIf(hasKubectl)('describes a failed container with kubectl (skipped: no kubectl on PATH)', () => {});

  /**
   * A second node with its own kubelet and widget plugin, whose PreStartContainer answers through
   * `preStart`, ready once its widgets are allocatable; `pod` places a one-widget pod on it.
   */
  async function extraNode(name: string, preStart: (ids: string[]) => Promise<void>, preStartRetryMs?: number) {
    const node = await startKubelet({
      client,
      nodeName: name,
      root: join(dir, `kubelet-${name}`),
      runtime: { baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' } },
      maxGraceMs: 200,
      ...(preStartRetryMs ? { preStartRetryMs } : {}),
    });
    const widgets = await startPlugin(node.pluginDir, join(dir, `host-${name}`), preStart);
    const allocatable = async () =>
      ((await client.get(`/api/v1/nodes/${name}`)).status as { allocatable?: Record<string, string> }).allocatable?.[
        RESOURCE
      ];
    await expect.poll(allocatable).toBe('4');
    return {
      widgets,
      pod: (podName: string) => ({
        ...pod(podName, 1, ['sleep', '30']),
        spec: { ...pod(podName, 1, ['sleep', '30']).spec, nodeName: name },
      }),
      close: async () => {
        await node.close();
        widgets.close();
      },
    };
  }

  it('starts pods side by side: one whose PreStartContainer hangs does not hold back the next', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    // The first widget's PreStart waits for the test; the others answer at once.
    const n3 = await extraNode('n3', (ids) => (ids.includes('w0') ? held : Promise.resolve()));
    try {
      await client.create(podPath('default'), n3.pod('slow'));
      await expect.poll(() => n3.widgets.allocations.length).toBe(1);
      await client.create(podPath('default'), n3.pod('quick'));
      await expect.poll(() => phase('quick')).toBe('Running');
      expect(await phase('slow')).toBe('Pending');
      release();
      await expect.poll(() => phase('slow')).toBe('Running');
    } finally {
      release();
      await n3.close();
    }
  });

  it('keeps a container whose PreStartContainer is refused waiting, and starts it once a retry succeeds', async () => {
    let refusals = 0;
    // Refused twice (as the node agent refuses while the kubelet's PodResources lags), then accepted.
    const n4 = await extraNode(
      'n4',
      async () => {
        if (refusals < 2) {
          refusals++;
          throw new Error(`no container holds devices (refusal ${refusals})`);
        }
      },
      300,
    );
    try {
      await client.create(podPath('default'), n4.pod('flaky'));
      const waiting = async () =>
        (
          (await client.get(podPath('default', 'flaky'))).status as {
            containerStatuses?: { state: { waiting?: { reason: string; message?: string } } }[];
          }
        ).containerStatuses?.[0]?.state.waiting;
      await expect.poll(waiting).toMatchObject({
        reason: 'CreateContainerConfigError',
        message: expect.stringContaining('no container holds devices'),
      });
      expect(await phase('flaky')).toBe('Pending');
      await expect.poll(() => phase('flaky'), { timeout: 10_000 }).toBe('Running');
      expect(refusals).toBe(2);
    } finally {
      await n4.close();
    }
  });

  it('deletes a pod at once while its refused container waits for the next try', async () => {
    const n5 = await extraNode(
      'n5',
      async () => {
        throw new Error('refused');
      },
      60_000,
    );
    try {
      await client.create(podPath('default'), n5.pod('stuck'));
      await expect.poll(() => n5.widgets.allocations.length).toBe(1);
      await new Promise((r) => setTimeout(r, 200)); // now in its 60 s wait
      await client.delete(podPath('default', 'stuck'));
      await expect
        .poll(async () => (await client.list(podPath('default'))).items.some((p) => p.metadata.name === 'stuck'), {
          timeout: 5_000,
        })
        .toBe(false);
    } finally {
      await n5.close();
    }
  });

  it('publishes each running container in its cgroup view of /proc and removes it on exit', async () => {
    const procDir = join(dir, 'proc');
    const k2 = await startKubelet({
      client,
      nodeName: 'n2',
      root: join(dir, 'kubelet2'),
      runtime: { baseEnv: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' }, procDir },
      maxGraceMs: 200,
    });
    try {
      const created = await client.create(podPath('default'), {
        metadata: { name: 'viewed' },
        spec: { nodeName: 'n2', containers: [{ name: 'main', image: 'x:1', command: ['sleep', '30'] }] },
      });
      await expect.poll(() => k2.processes().get(created.metadata.uid!)?.get('main')).toBeDefined();
      const pid = k2.processes().get(created.metadata.uid!)!.get('main')!;
      // The status manager reports the container's id a moment after it starts, as the kubelet's does.
      const containerId = async () =>
        (
          (await client.get(podPath('default', 'viewed'))).status as {
            containerStatuses?: { containerID?: string }[];
          }
        ).containerStatuses?.[0]?.containerID;
      await expect.poll(containerId).toMatch(/^containerd:\/\//);
      const id = (await containerId())!.replace('containerd://', '');
      const identity = parseProcCgroup(readFileSync(join(procDir, String(pid), 'cgroup'), 'utf8'));
      expect(identity).toEqual({ podUid: created.metadata.uid, containerId: id });
      expect(readFileSync(join(procDir, String(pid), 'status'), 'utf8')).toContain(`Pid:\t${pid}`);
      await client.delete(podPath('default', 'viewed'));
      await expect.poll(() => existsSync(join(procDir, String(pid)))).toBe(false);
    } finally {
      await k2.close();
    }
  });
});
