/**
 * The allocation path end to end on one node: extender-signed assignments, a kubelet admitting
 * pods over real gRPC, the agent tying each Allocate to one pod's container.
 */
import { existsSync, readFileSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { decodeLimitConfig, eventReasons, generateSigningKey, MIB, vcudaAnnotations } from '../../contract/index.js';
import { type Harness, NODE, startHarness } from '../../test/support/node-agent/agent-harness.js';
import type { GpuPodBuilder } from '../../test/support/node-agent/gpu-pod.js';
import type { ContainerAllocateResponse } from '../kubelet/protocol.js';
import { cdiSpecPath } from '../limits/cdi-spec.js';
import { allocationKey } from '../limits/container-files.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** The allocation directory key of a container, from the devices the kubelet recorded for it. */
function keyOf(hh: Harness, podName: string, container: string): string {
  const ids = hh.kubelet.podDevices.get(`default/${podName}`)?.get(container)?.get(hh.names.core);
  if (!ids) throw new Error(`the kubelet recorded no devices for ${podName}/${container}`);
  return allocationKey(ids);
}

function configOf(hh: Harness, podName: string, container: string) {
  const key = keyOf(hh, podName, container);
  return decodeLimitConfig(readFileSync(join(hh.config.paths.containersDir, key, 'etc', 'vcuda.conf')));
}

type CdiSpec = {
  kind: string;
  devices: { name: string; containerEdits: { env: string[]; deviceNodes: { path: string }[] } }[];
};

function cdiOf(hh: Harness, podName: string, container: string): CdiSpec {
  return JSON.parse(readFileSync(cdiSpecPath(hh.config.paths.cdiSpecDir, keyOf(hh, podName, container)), 'utf8'));
}

async function ready(hh: Harness): Promise<void> {
  await hh.kubelet.waitFor(() => hh.kubelet.devices(hh.names.core).length > 0, 'core plugin');
  await hh.kubelet.waitFor(() => hh.kubelet.devices(hh.names.memory).length > 0, 'memory plugin');
}

describe('Allocate for one pod', () => {
  it('gives the container its cards, limit file, region, libvcuda and env, then marks the pod allocated', async () => {
    h = await startHarness();
    await ready(h);
    const uuid1 = h.gpu.cards[1]?.uuid as string;
    const pod = h.pod('share-30').container('main', 30, 8192);
    await h.bind(pod, [[uuid1]]);
    const [result] = await h.kubelet.admitPod(pod.kubelet(true));
    const res = result?.responses[h.names.core] as ContainerAllocateResponse;

    // Allocate's answer names no pod: control nodes, mounts of the allocation's directory, a CDI device.
    const key = keyOf(h, 'share-30', 'main');
    expect(res.devices.map((d) => d.container_path)).toEqual([
      '/dev/nvidiactl',
      '/dev/nvidia-uvm',
      '/dev/nvidia-uvm-tools',
    ]);
    expect(res.devices.every((d) => d.permissions === 'rw')).toBe(true);
    expect(res.cdi_devices).toEqual([{ name: `vcuda.io/allocation=${key}` }]);
    const mounts = new Map(res.mounts.map((m) => [m.container_path, m]));
    expect(mounts.get('/etc/ld.so.preload')).toMatchObject({
      host_path: h.config.paths.preloadHostPath,
      read_only: true,
    });
    expect(readFileSync(h.config.paths.preloadHostPath, 'utf8')).toBe('/usr/lib/vcuda/libvcuda.so\n');
    expect(mounts.get('/usr/lib/vcuda/libvcuda.so')?.read_only).toBe(true);
    expect(mounts.get('/usr/lib/x86_64-linux-gnu/libcuda.so.1')?.read_only).toBe(true);
    const dir = join(h.config.paths.containersDir, key);
    expect(mounts.get('/etc/vcuda')).toMatchObject({ host_path: join(dir, 'etc'), read_only: true });
    expect(mounts.get('/run/vcuda')).toMatchObject({ host_path: join(dir, 'run'), read_only: false });
    expect(res.envs).toEqual({ VCUDA_CONFIG: '/etc/vcuda/vcuda.conf' });

    // PreStart filled the CDI device in with the granted card.
    const cdi = cdiOf(h, 'share-30', 'main');
    expect(cdi.kind).toBe('vcuda.io/allocation');
    expect(cdi.devices).toEqual([
      {
        name: key,
        containerEdits: {
          env: [`NVIDIA_VISIBLE_DEVICES=${uuid1}`, `CUDA_VISIBLE_DEVICES=${uuid1}`],
          deviceNodes: [{ path: '/dev/nvidia1', hostPath: '/dev/nvidia1', permissions: 'rw' }],
        },
      },
    ]);

    const config = configOf(h, 'share-30', 'main');
    expect(config).toMatchObject({ podUid: pod.uid, containerName: 'main', regionPath: '/run/vcuda/region' });
    expect(config.devices).toEqual([
      { uuid: uuid1, hostIndex: 1, mode: 'hard', memoryLimitBytes: 8192 * MIB, coreRequest: 30, coreLimit: 30 },
    ]);
    const region = readFileSync(join(dir, 'run/region'));
    expect(region.length).toBeGreaterThanOrEqual(8192);
    expect(region.subarray(0, 8).toString('latin1')).toBe('VCUDAREG');
    expect(region.readUInt32LE(16)).toBe(1);

    expect(h.cluster.isAllocated('default', 'share-30')).toBe(true);
    // GetPreferredAllocation steered the kubelet to devices of the granted card.
    const ids = h.kubelet.podDevices.get('default/share-30')?.get('main')?.get(h.names.core) ?? [];
    expect(ids).toHaveLength(30);
    expect(ids.every((id) => id.startsWith('c1-'))).toBe(true);
    expect(h.cluster.eventsOf('default', 'share-30').map((e) => e.reason)).toEqual([eventReasons.allocated]);
    // The memory plugin hands nothing out: limits come from the signed assignment alone.
    expect(result?.responses[h.names.memory]?.devices).toEqual([]);
  });

  it('allocates init and app containers of one pod in kubelet order, each to its own grant', async () => {
    h = await startHarness({ machine: { cards: 3, memoryMiB: 4096 } });
    await ready(h);
    const [c0, c1, c2] = h.gpu.cards.map((c) => c.uuid) as [string, string, string];
    const pod = h
      .pod('two-stage')
      .container('setup', 10, 512, true)
      .container('train', 200, 1)
      .container('side', 10, 256);
    // Grants in assignment order: init first, then app containers.
    await h.bind(pod, [[c0], [c0, c1], [c2]]);
    await h.kubelet.admitPod(pod.kubelet(false));
    expect(configOf(h, 'two-stage', 'setup').devices.map((d) => [d.uuid, d.coreRequest])).toEqual([[c0, 10]]);
    expect(configOf(h, 'two-stage', 'train').devices.map((d) => [d.uuid, d.coreRequest])).toEqual([
      [c0, 100],
      [c1, 100],
    ]);
    expect(configOf(h, 'two-stage', 'side').devices.map((d) => [d.uuid, d.memoryLimitBytes])).toEqual([
      [c2, 256 * MIB],
    ]);
    expect(h.cluster.isAllocated('default', 'two-stage')).toBe(true);
    // The kubelet handed setup's devices on to train and does not list setup: the tie went through reuse.
    const devices = h.kubelet.podDevices.get('default/two-stage');
    const setupIds = devices?.get('setup')?.get(h.names.core) ?? [];
    const trainIds = devices?.get('train')?.get(h.names.core) ?? [];
    expect(setupIds).toHaveLength(10);
    expect(setupIds.every((id) => trainIds.includes(id))).toBe(true);
    expect(h.kubelet.listPodResources()[0]?.containers.map((c) => c.name)).toEqual(['train', 'side']);
  });
});

/**
 * Waits until both plugins registered again and stay so: the agent may restart its servers once
 * more when it notices its sockets were deleted, which takes up to a second.
 */
async function settled(hh: Harness, before: number): Promise<void> {
  await hh.kubelet.waitFor(() => hh.kubelet.registrations.length >= before + 2, 'plugins to register again');
  const sockets = () =>
    ['vcuda-core.sock', 'vcuda-memory.sock'].every((f) => existsSync(join(hh.kubelet.pluginDir, f)));
  for (let seen = -1; seen !== hh.kubelet.registrations.length || !sockets(); ) {
    seen = hh.kubelet.registrations.length;
    await new Promise((r) => setTimeout(r, 1200));
  }
  await ready(hh);
}

async function restartKubelet(hh: Harness): Promise<void> {
  const before = hh.kubelet.registrations.length;
  await hh.kubelet.restart();
  await settled(hh, before);
}

/** Binds every pod, then admits them all at once, as a kubelet does with a burst of pods. */
async function admitAll(hh: Harness, pods: { pod: GpuPodBuilder; cards: string[][] }[]): Promise<void> {
  for (const { pod, cards } of pods) await hh.bind(pod, cards);
  await Promise.all(pods.map(({ pod }) => hh.kubelet.admitPod(pod.kubelet(false))));
}

describe('many identical pods starting at once on one node, no pending rule', () => {
  it('20 pods with a GPU init container, a kubelet restart midway: each container gets exactly its own grant', async () => {
    h = await startHarness({ machine: { cards: 8, memoryMiB: 4096 } });
    await ready(h);
    const hh = h;
    const cards = h.gpu.cards.map((c) => c.uuid);
    const pods = Array.from({ length: 20 }, (_, i) => ({
      pod: hh.pod(`same-${i}`).container('warmup', 10, 50, true).container('main', 30, 1000),
      // Identical specs, different cards: the kubelet's choice of devices cannot say which pod it is.
      warm: cards[(i + 3) % 8] as string,
      card: cards[i % 8] as string,
      memory: 1000 + i,
    }));
    for (const p of pods) await h.bind(p.pod, [[p.warm], [p.card]]);
    // All twenty admitted at once: every Allocate, then the kubelet records the devices.
    await Promise.all(pods.map(({ pod }) => hh.kubelet.allocatePod(pod.kubelet(true))));
    // Half the pods start, the kubelet restarts (plugins re-register), the other half start.
    await Promise.all(pods.slice(0, 10).map(({ pod }) => hh.kubelet.startContainers(pod.kubelet(true))));
    await restartKubelet(h);
    await Promise.all(pods.map(({ pod }) => hh.kubelet.startContainers(pod.kubelet(true))));

    const keys = new Set<string>();
    for (const { pod, warm, card } of pods) {
      for (const [container, uuid, core] of [
        ['warmup', warm, 10],
        ['main', card, 30],
      ] as const) {
        const config = configOf(h, pod.name, container);
        expect(config).toMatchObject({ podUid: pod.uid, containerName: container });
        expect(config.devices).toEqual([expect.objectContaining({ uuid, coreRequest: core })]);
        const visible = cdiOf(h, pod.name, container).devices[0]?.containerEdits.env;
        expect(visible).toContain(`NVIDIA_VISIBLE_DEVICES=${uuid}`);
        keys.add(keyOf(h, pod.name, container));
      }
      expect(h.cluster.isAllocated('default', pod.name)).toBe(true);
    }
    expect(keys.size).toBe(40);
    expect(h.agent.allocator.records()).toHaveLength(40);
  });

  it('20 identical pods admitted and started together, each to its own card and memory', async () => {
    h = await startHarness({ machine: { cards: 8, memoryMiB: 4096 } });
    await ready(h);
    const hh = h;
    const cards = h.gpu.cards.map((c) => c.uuid);
    const pods = Array.from({ length: 20 }, (_, i) => ({
      pod: hh.pod(`twin-${i}`).container('main', 30, 100 + i),
      cards: [[cards[(i * 3) % 8] as string]],
    }));
    await admitAll(h, pods);
    for (const [i, { pod, cards: granted }] of pods.entries()) {
      expect(configOf(h, pod.name, 'main')).toMatchObject({
        podUid: pod.uid,
        devices: [expect.objectContaining({ uuid: granted[0]?.[0], memoryLimitBytes: (100 + i) * MIB })],
      });
    }
  });
});

describe('PreStartContainer: the holder of the devices, or no start', () => {
  it('devices the kubelet reports on two pods: refused, naming both pods', async () => {
    h = await startHarness();
    await ready(h);
    const card = h.gpu.cards[0]?.uuid as string;
    const mine = h.pod('mine').container('main', 30, 1000);
    await h.bind(mine, [[card]]);
    h.kubelet.tamper = (pods) => [
      ...pods,
      ...pods.filter((p) => p.name === 'mine').map((p) => ({ ...p, name: 'theirs' })),
    ];
    await expect(h.kubelet.admitPod(mine.kubelet(false))).rejects.toThrow(
      /reports devices \[.*\] on default\/mine container main; default\/theirs container main; a device belongs to one container/,
    );
    expect(h.cluster.eventsOf('default', 'mine').at(-1)?.reason).toBe(eventReasons.allocateFailed);
    const key = keyOf(h, 'mine', 'main');
    expect(existsSync(join(h.config.paths.containersDir, key, 'etc', 'vcuda.conf'))).toBe(false);
    expect(existsSync(cdiSpecPath(h.config.paths.cdiSpecDir, key))).toBe(false);
    expect(h.cluster.isAllocated('default', 'mine')).toBe(false);
  });

  it('devices no container holds: refused, naming the pods that wait here', async () => {
    h = await startHarness();
    await ready(h);
    const waiting = h.pod('waiting').container('main', 30, 1000);
    await h.bind(waiting, [[h.gpu.cards[0]?.uuid as string]]);
    h.kubelet.tamper = () => [];
    await expect(h.kubelet.admitPod(waiting.kubelet(false))).rejects.toThrow(
      /no container holds devices \[.*\] in the kubelet's PodResources; .*pods waiting for a vcuda container here: default\/waiting/,
    );
    expect(h.agent.allocator.records()).toEqual([]);
  });

  it('fails at admission a pod placed by hand (spec.nodeName, no assignment), so it holds no cards', async () => {
    h = await startHarness();
    await ready(h);
    // Every card of the node, asked by a pod that skipped vcuda's admission and scheduling.
    const cards = h.gpu.cards.length;
    const bypass = h.pod('bypass').container('main', 100 * cards, 0);
    h.cluster.put(bypass.onNode(NODE).obj());
    await expect(h.kubelet.admitPod(bypass.kubelet(false))).rejects.toThrow(
      new RegExp(`Allocate failed due to .*has no signed assignment|no pod bound to node ${NODE} asks ${100 * cards}`),
    );
    // Its refusal is an Event on the pod, which the dashboard's refusals list (stage "allocate").
    expect(h.cluster.eventsOf('default', 'bypass')).toEqual([
      expect.objectContaining({
        reason: eventReasons.allocateFailed,
        message: expect.stringMatching(/no signed assignment/),
      }),
    ]);
    // The kubelet gave the devices back: a pod vcuda placed takes a card at once.
    const placed = h.pod('placed').container('main', 100, 0);
    await h.bind(placed, [[h.gpu.cards[0]?.uuid as string]]);
    await h.kubelet.admitPod(placed.kubelet(false));
  });

  it('a pod that is not bound to this node cannot take the devices', async () => {
    h = await startHarness();
    await ready(h);
    await expect(
      h.kubelet.admitPod({
        namespace: 'default',
        name: 'ghost',
        containers: [{ name: 'x', requests: { [h.names.core]: 55 } }],
      }),
    ).rejects.toThrow(/no pod bound to node node-a asks 55 .* with a verified assignment/);
    expect(h.cluster.refreshes).toBeGreaterThan(0);
  });

  it('a container whose PreStart never came has no limit file and no cards, also on reused devices', async () => {
    h = await startHarness();
    await ready(h);
    const first = h.pod('first').container('main', 30, 1000);
    await h.bind(first, [[h.gpu.cards[0]?.uuid as string]]);
    await h.kubelet.admitPod(first.kubelet(false));
    const ids = h.kubelet.podDevices.get('default/first')?.get('main')?.get(h.names.core) as string[];
    const key = allocationKey(ids);
    expect(existsSync(join(h.config.paths.containersDir, key, 'etc', 'vcuda.conf'))).toBe(true);
    // The same devices go to a new container (the first pod ended): Allocate alone leaves nothing behind.
    const res = await h.agent.allocator.allocate(ids);
    expect(res.mounts.find((m) => m.container_path === '/etc/vcuda')?.host_path).toBe(
      join(h.config.paths.containersDir, key, 'etc'),
    );
    expect(existsSync(join(h.config.paths.containersDir, key, 'etc', 'vcuda.conf'))).toBe(false);
    expect(existsSync(join(h.config.paths.containersDir, key, 'run', 'region'))).toBe(false);
    expect(existsSync(cdiSpecPath(h.config.paths.cdiSpecDir, key))).toBe(false);
    expect(h.agent.allocator.records()).toEqual([]);
  });

  it('two GPU init containers of one size whose devices the kubelet hands on: refused, naming the pod', async () => {
    h = await startHarness();
    await ready(h);
    const card = h.gpu.cards[0]?.uuid as string;
    const pod = h.pod('two-inits').container('a', 10, 10, true).container('b', 10, 10, true).container('main', 20, 10);
    await h.bind(pod, [[card], [card], [card]]);
    await expect(h.kubelet.admitPod(pod.kubelet(false))).rejects.toThrow(
      /partly held by default\/two-inits container main and no single GPU init container of default\/two-inits asks 10 core \(2 do\)/,
    );
    expect(h.cluster.eventsOf('default', 'two-inits').at(-1)?.reason).toBe(eventReasons.allocateFailed);
  });

  it("an app container that took all of its init container's devices: both run with the app's grant", async () => {
    h = await startHarness();
    await ready(h);
    const [c0, c1] = h.gpu.cards.map((c) => c.uuid) as [string, string];
    const pod = h.pod('same-size').container('prep', 30, 10, true).container('main', 30, 20);
    await h.bind(pod, [[c0], [c1]]);
    await h.kubelet.admitPod(pod.kubelet(false));
    const devices = h.kubelet.podDevices.get('default/same-size');
    expect(devices?.get('prep')?.get(h.names.core)).toEqual(devices?.get('main')?.get(h.names.core));
    // One allocation, tied to the app container: the pod's own grant, never another pod's cards.
    expect(configOf(h, 'same-size', 'main')).toMatchObject({
      podUid: pod.uid,
      containerName: 'main',
      devices: [expect.objectContaining({ uuid: c1, memoryLimitBytes: 20 * MIB })],
    });
    expect(h.agent.allocator.records().map((r) => r.container)).toEqual(['main']);
  });

  it('the plugin requires PreStartContainer', async () => {
    h = await startHarness();
    await ready(h);
    const core = h.kubelet.registrations.find((r) => r.resource_name === h?.names.core);
    expect(core?.options.pre_start_required).toBe(true);
  });
});

describe('refusals: the pod does not start and its events say why', () => {
  type Case = {
    name: string;
    bind: (hh: Harness, pod: GpuPodBuilder, card: string) => Promise<void>;
    error: RegExp;
    code: string;
  };
  const cases: Case[] = [
    {
      name: 'unsigned',
      bind: async (hh, pod) =>
        hh.cluster.put(
          pod
            .onNode(NODE)
            .annotate({ [vcudaAnnotations.assignedNode]: NODE })
            .obj(),
        ),
      error: /has no signed assignment \(vcuda.io\/assignment\)/,
      code: 'unsigned',
    },
    {
      name: 'forged',
      bind: async (hh, pod, card) => hh.bind(pod, [[card]], { key: await generateSigningKey('k1') }),
      error: /assignment signature does not verify with key "k1"/,
      code: 'bad-signature',
    },
    {
      name: 'unknown key',
      bind: async (hh, pod, card) => hh.bind(pod, [[card]], { key: await generateSigningKey('rogue') }),
      error: /signed with unknown key "rogue"/,
      code: 'unknown-kid',
    },
    {
      name: 'expired',
      bind: async (hh, pod, card) => hh.bind(pod, [[card]], { issuedAtMs: hh.nowMs.value - 600_000, ttlSeconds: 60 }),
      error: /assignment expired 540s ago/,
      code: 'expired',
    },
    {
      name: 'other node',
      bind: async (hh, pod, card) => hh.bind(pod, [[card]], { node: 'node-b' }),
      error: /assignment is for node node-b, not node-a/,
      code: 'wrong-node',
    },
    {
      name: 'card not on this node',
      bind: async (hh, pod) => hh.bind(pod, [['GPU-00000000-0000-0000-0000-000000000bad']]),
      error: /names card GPU-00000000-0000-0000-0000-000000000bad, not on node node-a/,
      code: 'unknown-card',
    },
  ];

  it.each(cases)('$name', async ({ bind, error, code }) => {
    h = await startHarness();
    await ready(h);
    const pod = h.pod('victim').container('main', 30, 1000);
    await bind(h, pod, h.gpu.cards[0]?.uuid as string);
    await expect(h.kubelet.admitPod(pod.kubelet(false))).rejects.toThrow(error);
    const events = h.cluster.eventsOf('default', 'victim');
    expect(events).toEqual([
      {
        namespace: 'default',
        name: 'victim',
        reason: eventReasons.allocateFailed,
        message: expect.stringMatching(error),
      },
    ]);
    expect(events[0]?.message).toMatch(/^pod default\/victim: /);
    expect(existsSync(join(h.config.paths.containersDir, pod.uid))).toBe(false);
    expect(h.cluster.isAllocated('default', 'victim')).toBe(false);
    expect(h.agent.metrics.registry.getSingleMetric('vcuda_allocations_total')).toBeDefined();
    const metrics = await h.agent.metrics.registry.metrics();
    expect(metrics).toContain(`vcuda_allocations_total{result="${code}"} 1`);
  });

  it('a missing JWKS refuses every assignment, naming the file', async () => {
    h = await startHarness({ jwks: async () => Promise.reject(new Error('JWKS /etc/vcuda/jwks/jwks.json: ENOENT')) });
    await ready(h);
    const pod = h.pod('keyless').container('main', 30, 1000);
    await h.bind(pod, [[h.gpu.cards[0]?.uuid as string]]);
    await expect(h.kubelet.admitPod(pod.kubelet(false))).rejects.toThrow(
      /pod default\/keyless: cannot read the verification keys: JWKS \/etc\/vcuda\/jwks\/jwks.json: ENOENT/,
    );
  });

  it('a card that turned unhealthy is not handed out', async () => {
    h = await startHarness();
    await ready(h);
    h.agent.health.apply({ cardIndex: 0, kind: 'xid', xid: 79 });
    const pod = h.pod('late').container('main', 30, 1000);
    await h.bind(pod, [[h.gpu.cards[0]?.uuid as string]]);
    await expect(h.kubelet.admitPod(pod.kubelet(false))).rejects.toThrow(/is unhealthy \(Xid 79\)/);
  });
});

describe('allocated-at', () => {
  it('is retried when the API server refuses it, without failing the Allocate', async () => {
    h = await startHarness();
    await ready(h);
    h.cluster.failAnnotations = 2;
    const pod = h.pod('bumpy').container('main', 30, 1000);
    await h.bind(pod, [[h.gpu.cards[0]?.uuid as string]]);
    await h.kubelet.admitPod(pod.kubelet(false));
    await vi.waitFor(() => expect(h?.cluster.isAllocated('default', 'bumpy')).toBe(true));
    expect(h.warnings.some((w) => w.includes('writing vcuda.io/allocated-at failed'))).toBe(true);
  });
});

describe('PodResources load', () => {
  it('containers starting together share one List instead of tripping the kubelet rate limit', async () => {
    h = await startHarness({ machine: { cards: 8, memoryMiB: 4096 } });
    await ready(h);
    const cards = h.gpu.cards.map((c) => c.uuid);
    const pods = Array.from({ length: 12 }, (_, i) => ({
      pod: (h as Harness).pod(`burst-${i}`).container('main', 5 + i, 100),
      cards: [[cards[i % 8] as string]],
    }));
    await admitAll(h, pods);
    const before = h.kubelet.listCalls;
    // A kubelet restarting all twelve containers at once.
    await Promise.all(pods.map(({ pod }) => h?.kubelet.preStart(`default/${pod.name}`, 'main')));
    expect(h.kubelet.listCalls - before).toBeLessThanOrEqual(2);
  });
});

describe('restart and housekeeping', () => {
  it('a restarted agent re-learns running containers (expired assignments still count) and cleans up gone pods', async () => {
    h = await startHarness();
    await ready(h);
    const pod = h.pod('long-runner').container('main', 30, 1000);
    await h.bind(pod, [[h.gpu.cards[1]?.uuid as string]], { ttlSeconds: 60 });
    await h.kubelet.admitPod(pod.kubelet(false));
    const key = keyOf(h, 'long-runner', 'main');
    const configPath = join(h.config.paths.containersDir, key, 'etc', 'vcuda.conf');
    const configBefore = statSync(configPath).mtimeMs;

    h.nowMs.value += 3_600_000;
    const agent = await h.restartAgent();
    expect(agent.allocator.records()).toEqual([
      expect.objectContaining({ podUid: pod.uid, container: 'main', confirmed: true }),
    ]);
    // A container restart after the agent restart passes PreStart on the re-learned tie.
    await h.kubelet.preStart('default/long-runner', 'main');
    expect(statSync(configPath).mtimeMs).toBe(configBefore);

    agent.refreshMetrics();
    const text = await agent.metrics.registry.metrics();
    expect(text).toMatch(
      /vcuda_container_memory_limit_bytes\{namespace="default",pod="long-runner",container="main",card="GPU-[^"]+"\} 1048576000/,
    );
    expect(text).toMatch(/vcuda_card_core_allocated\{card="GPU-[^"]+",index="1"\} 30/);

    h.cluster.delete('default', 'long-runner');
    // Files of a gone pod are kept for the grace period...
    expect(await agent.housekeep()).toEqual([]);
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(join(h.config.paths.containersDir, key), old, old);
    // ...and removed after it, with the CDI spec.
    expect(await agent.housekeep()).toEqual([key]);
    expect(existsSync(join(h.config.paths.containersDir, key))).toBe(false);
    expect(existsSync(cdiSpecPath(h.config.paths.cdiSpecDir, key))).toBe(false);
    expect(agent.allocator.records()).toEqual([]);
  });
});

describe('agent restart between Allocate and PreStartContainer', () => {
  it('the restarted agent ties the container at its PreStart', async () => {
    h = await startHarness();
    await ready(h);
    const pod = h.pod('slow-pull').container('main', 30, 1000);
    await h.bind(pod, [[h.gpu.cards[1]?.uuid as string]]);
    await h.kubelet.allocatePod(pod.kubelet(false));
    const before = h.kubelet.registrations.length;
    const agent = await h.restartAgent();
    // PodResources lists the container, but no PreStart wrote its files: nothing to re-learn.
    expect(agent.allocator.records()).toEqual([]);
    await settled(h, before);
    await h.kubelet.startContainers(pod.kubelet(false));
    expect(configOf(h, 'slow-pull', 'main')).toMatchObject({ podUid: pod.uid, containerName: 'main' });
  });
});
