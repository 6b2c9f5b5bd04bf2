/**
 * The allocation path end to end on one node: extender-signed assignments, a kubelet admitting
 * pods over real gRPC, the agent tying each Allocate to one pod's container.
 */
import { existsSync, readFileSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { decodeLimitConfig, eventReasons, generateSigningKey, MIB, vcudaAnnotations } from '../../contract/index.js';
import type { ContainerAllocateResponse } from '../device-plugin/protocol.js';
import { type Harness, NODE, startHarness } from '../testing/agent-harness.js';
import type { GpuPodBuilder } from '../testing/gpu-pod.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function configOf(hh: Harness, podUid: string, container: string) {
  return decodeLimitConfig(readFileSync(join(hh.config.paths.containersDir, podUid, container, 'vcuda.conf')));
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

    expect(res.devices.map((d) => d.container_path)).toEqual([
      '/dev/nvidia1',
      '/dev/nvidiactl',
      '/dev/nvidia-uvm',
      '/dev/nvidia-uvm-tools',
    ]);
    expect(res.devices.every((d) => d.permissions === 'rw')).toBe(true);
    const mounts = new Map(res.mounts.map((m) => [m.container_path, m]));
    expect(mounts.get('/etc/ld.so.preload')).toMatchObject({
      host_path: h.config.paths.preloadHostPath,
      read_only: true,
    });
    expect(readFileSync(h.config.paths.preloadHostPath, 'utf8')).toBe('/usr/lib/vcuda/libvcuda.so\n');
    expect(mounts.get('/usr/lib/vcuda/libvcuda.so')?.read_only).toBe(true);
    expect(mounts.get('/usr/lib/x86_64-linux-gnu/libcuda.so.1')?.read_only).toBe(true);
    const dir = join(h.config.paths.containersDir, pod.uid, 'main');
    expect(mounts.get('/etc/vcuda/vcuda.conf')).toMatchObject({ host_path: join(dir, 'vcuda.conf'), read_only: true });
    expect(mounts.get('/run/vcuda')).toMatchObject({ host_path: join(dir, 'run'), read_only: false });
    expect(res.envs).toEqual({
      VCUDA_CONFIG: '/etc/vcuda/vcuda.conf',
      NVIDIA_VISIBLE_DEVICES: uuid1,
      CUDA_VISIBLE_DEVICES: uuid1,
    });

    const config = configOf(h, pod.uid, 'main');
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
    expect(configOf(h, pod.uid, 'setup').devices.map((d) => [d.uuid, d.coreRequest])).toEqual([[c0, 10]]);
    expect(configOf(h, pod.uid, 'train').devices.map((d) => [d.uuid, d.coreRequest])).toEqual([
      [c0, 100],
      [c1, 100],
    ]);
    expect(configOf(h, pod.uid, 'side').devices.map((d) => [d.uuid, d.memoryLimitBytes])).toEqual([[c2, 256 * MIB]]);
    expect(h.cluster.isAllocated('default', 'two-stage')).toBe(true);
  });
});

/** The extender's rule, as a test double: bind the next pod of a shape only when none of that shape is pending. */
async function runStaggered(
  hh: Harness,
  pods: { pod: GpuPodBuilder; core: number; card: string }[],
): Promise<Map<string, ContainerAllocateResponse>> {
  const responses = new Map<string, ContainerAllocateResponse>();
  const queues = new Map<number, typeof pods>();
  for (const p of pods) queues.set(p.core, [...(queues.get(p.core) ?? []), p]);
  // One lane per shape, all lanes at once: pods of different shapes are pending together.
  await Promise.all(
    [...queues.values()].map(async (lane) => {
      for (const { pod, card } of lane) {
        await hh.bind(pod, [[card]]);
        const [r] = await hh.kubelet.admitPod(pod.kubelet(false));
        responses.set(pod.uid, r?.responses[hh.names.core] as ContainerAllocateResponse);
        expect(hh.cluster.isAllocated(pod.namespace, pod.name)).toBe(true);
      }
    }),
  );
  return responses;
}

describe('many pods starting at once on one node', () => {
  it('20 equal-size pods: each container gets exactly its own assignment', async () => {
    h = await startHarness({ machine: { cards: 8, memoryMiB: 4096 } });
    await ready(h);
    const cards = h.gpu.cards.map((c) => c.uuid);
    const pods = Array.from({ length: 20 }, (_, i) => ({
      pod: (h as Harness).pod(`same-${i}`).container('main', 30, 1000),
      core: 30,
      card: cards[i % 8] as string,
    }));
    // All 20 are created at once; the extender binds them one after another as each is allocated.
    const responses = await runStaggered(h, pods);
    for (const { pod, card } of pods) {
      const config = configOf(h, pod.uid, 'main');
      expect(config.podUid).toBe(pod.uid);
      expect(config.devices.map((d) => d.uuid)).toEqual([card]);
      expect(responses.get(pod.uid)?.envs['NVIDIA_VISIBLE_DEVICES']).toBe(card);
    }
    expect(h.agent.allocator.records().filter((r) => r.confirmed)).toHaveLength(20);
  });

  it("20 pods of 5 shapes in parallel lanes: no container gets another pod's cards", async () => {
    h = await startHarness({ machine: { cards: 8, memoryMiB: 4096 } });
    await ready(h);
    const cards = h.gpu.cards.map((c) => c.uuid);
    const shapes = [10, 15, 20, 25, 30];
    const pods = Array.from({ length: 20 }, (_, i) => ({
      pod: (h as Harness).pod(`mixed-${i}`).container('main', shapes[i % 5] as number, 100 + i),
      core: shapes[i % 5] as number,
      card: cards[i % 8] as string,
    }));
    await runStaggered(h, pods);
    for (const { pod, card, core } of pods) {
      const config = configOf(h, pod.uid, 'main');
      expect(config.podUid).toBe(pod.uid);
      expect(config.devices).toEqual([
        expect.objectContaining({
          uuid: card,
          coreRequest: core,
          memoryLimitBytes: Number(pod.name.split('-')[1]) * MIB + 100 * MIB,
        }),
      ]);
    }
  });

  it('two pending pods of one shape make Allocate fail loudly instead of guessing', async () => {
    h = await startHarness();
    await ready(h);
    const card = h.gpu.cards[0]?.uuid as string;
    const a = h.pod('twin-a').container('main', 30, 1000);
    const b = h.pod('twin-b').container('main', 30, 1000);
    await h.bind(a, [[card]]);
    await h.bind(b, [[card]]);
    await expect(h.kubelet.admitPod(a.kubelet(false))).rejects.toThrow(
      /ambiguous: pending pods default\/twin-a, default\/twin-b .*refusing to guess/,
    );
    for (const name of ['twin-a', 'twin-b']) {
      expect(h.cluster.eventsOf('default', name)).toEqual([
        expect.objectContaining({ reason: eventReasons.allocateFailed, message: expect.stringMatching(/ambiguous/) }),
      ]);
    }
    expect(existsSync(join(h.config.paths.containersDir, a.uid))).toBe(false);
    expect(existsSync(join(h.config.paths.containersDir, b.uid))).toBe(false);
  });

  it('an Allocate no pending pod waits for fails loudly and says what is pending', async () => {
    h = await startHarness();
    await ready(h);
    const p = h.pod('forty').container('main', 40, 1000);
    await h.bind(p, [[h.gpu.cards[0]?.uuid as string]]);
    await expect(
      h.kubelet.admitPod({
        namespace: 'default',
        name: 'ghost',
        containers: [{ name: 'x', requests: { [h.names.core]: 55 } }],
      }),
    ).rejects.toThrow(
      /no pending pod with a vcuda assignment waits for a container of that size; pending: .*forty \(next 40 core\)/,
    );
    expect(h.cluster.refreshes).toBeGreaterThan(0);
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

describe('PreStartContainer confirms the tie through PodResources', () => {
  it('fails loudly when the kubelet reports the devices on another pod', async () => {
    h = await startHarness();
    await ready(h);
    const pod = h.pod('mine').container('main', 30, 1000);
    await h.bind(pod, [[h.gpu.cards[0]?.uuid as string]]);
    h.kubelet.tamper = (pods) => pods.map((p) => ({ ...p, name: p.name === 'mine' ? 'theirs' : p.name }));
    await expect(h.kubelet.admitPod(pod.kubelet(false))).rejects.toThrow(
      /tied by vcuda to default\/mine container main, but the kubelet reports them on default\/theirs container main/,
    );
    expect(h.cluster.eventsOf('default', 'mine').at(-1)?.reason).toBe(eventReasons.allocateFailed);
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
      core: 5 + i,
      card: cards[i % 8] as string,
    }));
    await runStaggered(h, pods);
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
    const configBefore = statSync(join(h.config.paths.containersDir, pod.uid, 'main', 'vcuda.conf')).mtimeMs;

    h.nowMs.value += 3_600_000;
    const agent = await h.restartAgent();
    expect(agent.allocator.records()).toEqual([
      expect.objectContaining({ podUid: pod.uid, container: 'main', confirmed: true }),
    ]);
    // A container restart after the agent restart passes PreStart on the re-learned tie.
    await h.kubelet.preStart('default/long-runner', 'main');
    expect(statSync(join(h.config.paths.containersDir, pod.uid, 'main', 'vcuda.conf')).mtimeMs).toBe(configBefore);

    agent.refreshMetrics();
    const text = await agent.metrics.registry.metrics();
    expect(text).toMatch(
      /vcuda_container_memory_limit_bytes\{namespace="default",pod="long-runner",container="main",card="GPU-[^"]+"\} 1048576000/,
    );
    expect(text).toMatch(/vcuda_card_core_allocated\{card="GPU-[^"]+",index="1"\} 30/);

    h.cluster.delete('default', 'long-runner');
    // Fresh files of a pod the list no longer shows are kept for the grace period...
    expect(await agent.housekeep()).toEqual([]);
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(join(h.config.paths.containersDir, pod.uid), old, old);
    // ...and removed after it.
    expect(await agent.housekeep()).toEqual([pod.uid]);
    expect(existsSync(join(h.config.paths.containersDir, pod.uid))).toBe(false);
    expect(agent.allocator.records()).toEqual([]);
  });
});
