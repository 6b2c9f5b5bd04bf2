/**
 * One simulated node's kubelet: registers its Node (standard labels, cpu/memory/pods capacity,
 * device-plugin resources as their plugins advertise them), watches the pods bound to it, admits
 * each through the device manager (Allocate at admission, PreStartContainer as each container starts), runs its containers as host
 * processes, reports pod status, and on deletion stops the processes, frees the devices and
 * removes the pod, as the kubelet does.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ContainerAllocateResponse } from '../../node-agent/device-plugin/protocol.js';
import { type KubeClient, type KubeObj, podPath } from '../kube-client.js';
import {
  type ContainerSpec,
  type RunningContainer,
  type RuntimeConfig,
  startContainer,
  stopContainer,
} from './container-runtime.js';
import { DeviceManager, type KubeletContainer } from './device-manager.js';

export type KubeletOptions = {
  client: KubeClient;
  nodeName: string;
  /** Root of this node's kubelet directories (device-plugins/, pod-resources/, logs/). */
  root: string;
  labels?: Record<string, string>;
  taints?: { key: string; value?: string; effect: string }[];
  capacity?: { cpu?: string; memory?: string; pods?: string };
  runtime: Omit<RuntimeConfig, 'logDir'>;
  /** Cap on the termination grace period, so deletions finish in a test's time. */
  maxGraceMs?: number;
  log?: (msg: string) => void;
};

type PodSpecLike = {
  nodeName?: string;
  restartPolicy?: string;
  containers?: (ContainerSpec & {
    resources?: { limits?: Record<string, string | number>; requests?: Record<string, string | number> };
  })[];
  initContainers?: (ContainerSpec & {
    resources?: { limits?: Record<string, string | number>; requests?: Record<string, string | number> };
  })[];
};

type ContainerState = {
  running?: RunningContainer;
  restarts: number;
  terminated?: { exitCode: number; reason: string };
};

type PodRecord = {
  uid: string;
  namespace: string;
  name: string;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  containers: Map<string, ContainerState>;
  responses: Map<string, ContainerAllocateResponse[]>;
  stopping: boolean;
  startTime: string;
};

export type SimKubelet = {
  readonly nodeName: string;
  readonly devices: DeviceManager;
  /** Directory device plugins register in (`kubelet.sock` lives here). */
  readonly pluginDir: string;
  readonly podResourcesSocket: string;
  /** Pod uid → host pid of each running container, for tests that check processes. */
  processes(): Map<string, Map<string, number>>;
  close(): Promise<void>;
};

export async function startKubelet(opts: KubeletOptions): Promise<SimKubelet> {
  const { client, nodeName } = opts;
  const log = opts.log ?? (() => {});
  const logDir = join(opts.root, 'logs');
  mkdirSync(logDir, { recursive: true });
  const runtime: RuntimeConfig = { ...opts.runtime, logDir };
  const devices = await DeviceManager.start(opts.root);
  const maxGraceMs = opts.maxGraceMs ?? 2000;
  const pods = new Map<string, PodRecord>();
  const statusChains = new Map<string, Promise<void>>();
  const abort = new AbortController();
  let queue = Promise.resolve();
  let closed = false;

  await registerNode();

  async function registerNode(): Promise<void> {
    const cap = {
      cpu: opts.capacity?.cpu ?? '64',
      memory: opts.capacity?.memory ?? '512Gi',
      pods: opts.capacity?.pods ?? '110',
    };
    const now = new Date().toISOString();
    const node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: nodeName,
        labels: {
          'kubernetes.io/hostname': nodeName,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'beta.kubernetes.io/os': 'linux',
          'beta.kubernetes.io/arch': 'amd64',
          ...(opts.labels ?? {}),
        },
      },
      spec: { ...(opts.taints?.length ? { taints: opts.taints } : {}) },
    };
    try {
      await client.create('/api/v1/nodes', node);
    } catch (e) {
      if ((e as { code?: number }).code !== 409) throw e;
    }
    await client.mergePatch(`/api/v1/nodes/${nodeName}/status`, {
      status: {
        capacity: cap,
        allocatable: cap,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status',
            lastHeartbeatTime: now,
            lastTransitionTime: now,
          },
        ],
        addresses: [
          { type: 'InternalIP', address: '127.0.0.1' },
          { type: 'Hostname', address: nodeName },
        ],
        nodeInfo: {
          kubeletVersion: 'v1.26.5-vcuda-sim',
          containerRuntimeVersion: 'sim://1',
          operatingSystem: 'linux',
          architecture: 'amd64',
        },
      },
    });
  }

  // Device-plugin resources appear in capacity as their plugins advertise healthy devices.
  let capacityTimer: NodeJS.Timeout | undefined;
  devices.onChange(() => {
    clearTimeout(capacityTimer);
    capacityTimer = setTimeout(() => {
      const counts = Object.fromEntries(devices.resources().map((r) => [r, String(devices.healthyCount(r))]));
      void client
        .strategicPatch(`/api/v1/nodes/${nodeName}/status`, { status: { capacity: counts, allocatable: counts } })
        .catch(() => undefined);
    }, 20);
  });

  // Node-level extended resources (patched into status.capacity by others) become allocatable,
  // as the kubelet's node status loop makes them.
  void client.listWatch(
    '/api/v1/nodes',
    `fieldSelector=${encodeURIComponent(`metadata.name=${nodeName}`)}`,
    {
      onSync: (items) => items.forEach(mirrorCapacity),
      onEvent: (e) => {
        if (e.type !== 'DELETED') mirrorCapacity(e.object);
      },
    },
    abort.signal,
  );

  function mirrorCapacity(node: KubeObj): void {
    const st = (node.status ?? {}) as { capacity?: Record<string, string>; allocatable?: Record<string, string> };
    const missing: Record<string, string> = {};
    for (const [k, v] of Object.entries(st.capacity ?? {})) {
      if (k.includes('/') && st.allocatable?.[k] !== v) missing[k] = v;
    }
    if (Object.keys(missing).length === 0) return;
    void client
      .strategicPatch(`/api/v1/nodes/${nodeName}/status`, { status: { allocatable: missing } })
      .catch(() => undefined);
  }

  function containerRequests(spec: PodSpecLike): KubeletContainer[] {
    const registered = new Set(devices.resources());
    const read = (c: NonNullable<PodSpecLike['containers']>[number], isInit: boolean): KubeletContainer => {
      const all = { ...(c.resources?.requests ?? {}), ...(c.resources?.limits ?? {}) };
      const requests: Record<string, number> = {};
      for (const [k, v] of Object.entries(all)) if (registered.has(k)) requests[k] = Number(v);
      return { name: c.name, isInit, requests };
    };
    return [
      ...(spec.initContainers ?? []).map((c) => read(c, true)),
      ...(spec.containers ?? []).map((c) => read(c, false)),
    ];
  }

  async function reportStatus(rec: PodRecord, extra: Record<string, unknown> = {}): Promise<void> {
    const specNames = [...rec.containers.keys()];
    const containerStatuses = specNames.map((name) => {
      const s = rec.containers.get(name)!;
      const state = s.terminated
        ? { terminated: { exitCode: s.terminated.exitCode, reason: s.terminated.reason } }
        : s.running
          ? { running: { startedAt: rec.startTime } }
          : { waiting: { reason: 'ContainerCreating' } };
      return {
        name,
        ready: !!s.running && !s.terminated,
        restartCount: s.restarts,
        state,
        image: 'sim',
        imageID: '',
        started: !!s.running,
      };
    });
    const ready = rec.phase === 'Running' && containerStatuses.every((c) => c.ready);
    const now = new Date().toISOString();
    const body = {
      status: {
        phase: rec.phase,
        hostIP: '127.0.0.1',
        podIP: '127.0.0.1',
        startTime: rec.startTime,
        conditions: [
          { type: 'PodScheduled', status: 'True', lastTransitionTime: rec.startTime },
          { type: 'Initialized', status: 'True', lastTransitionTime: rec.startTime },
          { type: 'ContainersReady', status: ready ? 'True' : 'False', lastTransitionTime: now },
          { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: now },
        ],
        containerStatuses,
        ...extra,
      },
    };
    // Reports of one pod go out in the order they were made, so a late "Running" never lands after "Failed".
    const previous = statusChains.get(rec.uid) ?? Promise.resolve();
    const next = previous
      .then(() => client.mergePatch(`${podPath(rec.namespace, rec.name)}/status`, body))
      .then(
        () => undefined,
        () => undefined,
      );
    statusChains.set(rec.uid, next);
    await next;
  }

  function finishIfDone(rec: PodRecord, spec: PodSpecLike): void {
    const states = [...rec.containers.values()];
    if (!states.every((s) => s.terminated)) return;
    rec.phase = states.every((s) => s.terminated!.exitCode === 0) ? 'Succeeded' : 'Failed';
    devices.releasePod(rec.uid);
    void reportStatus(rec);
    log(`${nodeName}: pod ${rec.namespace}/${rec.name} ${rec.phase} (restartPolicy ${spec.restartPolicy ?? 'Always'})`);
  }

  function run(rec: PodRecord, c: ContainerSpec, spec: PodSpecLike): void {
    const state = rec.containers.get(c.name)!;
    const running = startContainer(rec.uid, c, rec.responses.get(c.name) ?? [], runtime);
    state.running = running;
    delete state.terminated;
    void running.exited.then(({ exitCode }) => {
      if (rec.stopping || closed) return;
      const policy = spec.restartPolicy ?? 'Always';
      if (policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0)) {
        state.restarts++;
        state.terminated = { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error' };
        void reportStatus(rec);
        const t = setTimeout(
          () => {
            if (!rec.stopping && !closed) {
              run(rec, c, spec);
              void reportStatus(rec);
            }
          },
          Math.min(10_000, 500 * 2 ** Math.min(state.restarts, 5)),
        );
        t.unref();
        return;
      }
      state.terminated = { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error' };
      delete state.running;
      finishIfDone(rec, spec);
    });
  }

  /** PreStartContainer as the container is about to start; a refusal fails the pod. */
  async function preStart(rec: PodRecord, container: string): Promise<boolean> {
    try {
      await devices.preStart(rec.uid, container);
      return true;
    } catch (e) {
      rec.phase = 'Failed';
      await reportStatus(rec, { reason: 'PreStartContainerFailed', message: (e as Error).message });
      devices.releasePod(rec.uid);
      log(`${nodeName}: pod ${rec.namespace}/${rec.name} not started: ${(e as Error).message}`);
      return false;
    }
  }

  async function startPod(pod: KubeObj): Promise<void> {
    const spec = (pod.spec ?? {}) as PodSpecLike;
    const rec: PodRecord = {
      uid: pod.metadata.uid!,
      namespace: pod.metadata.namespace!,
      name: pod.metadata.name,
      phase: 'Pending',
      containers: new Map((spec.containers ?? []).map((c) => [c.name, { restarts: 0 }])),
      responses: new Map(),
      stopping: false,
      startTime: new Date().toISOString(),
    };
    pods.set(rec.uid, rec);
    try {
      const admitted = await devices.allocatePod({ ...rec, containers: containerRequests(spec) });
      rec.responses = new Map(admitted.map((a) => [a.container, Object.values(a.responses)]));
    } catch (e) {
      rec.phase = 'Failed';
      await reportStatus(rec, {
        reason: 'UnexpectedAdmissionError',
        message: `Pod was rejected: ${(e as Error).message}`,
      });
      log(`${nodeName}: pod ${rec.namespace}/${rec.name} rejected: ${(e as Error).message}`);
      return;
    }
    if (rec.stopping) return;
    // Init containers run to completion first; the sim runs them one after the other.
    for (const c of spec.initContainers ?? []) {
      if (!(await preStart(rec, c.name))) return;
      const done = await startContainer(rec.uid, c, rec.responses.get(c.name) ?? [], runtime).exited;
      if (done.exitCode !== 0) {
        rec.phase = 'Failed';
        await reportStatus(rec, {
          reason: 'InitContainerFailed',
          message: `init container ${c.name} exited ${done.exitCode}`,
        });
        devices.releasePod(rec.uid);
        return;
      }
    }
    for (const c of spec.containers ?? []) if (!(await preStart(rec, c.name))) return;
    rec.phase = 'Running';
    for (const c of spec.containers ?? []) run(rec, c, spec);
    await reportStatus(rec);
  }

  async function stopPod(
    uid: string,
    andDelete?: { namespace: string; name: string; graceSeconds: number },
  ): Promise<void> {
    const rec = pods.get(uid);
    if (rec) {
      rec.stopping = true;
      const grace = Math.min(maxGraceMs, (andDelete?.graceSeconds ?? 0) * 1000);
      await Promise.all(
        [...rec.containers.values()].map((s) => (s.running ? stopContainer(s.running, grace) : undefined)),
      );
      devices.releasePod(uid);
      pods.delete(uid);
      statusChains.delete(uid);
    }
    if (andDelete) {
      // The kubelet's status manager: DeleteOptions in the body (kube-apiserver ignores query
      // options beside a body), grace 0, and the pod's UID so a recreated namesake is left alone.
      await client
        .request('DELETE', podPath(andDelete.namespace, andDelete.name), {
          kind: 'DeleteOptions',
          apiVersion: 'v1',
          gracePeriodSeconds: 0,
          preconditions: { uid },
        })
        .catch(() => undefined);
    }
  }

  const serial = (fn: () => Promise<void>) => {
    queue = queue.then(fn).catch((e: Error) => log(`${nodeName}: ${e.message}`));
  };

  function onPod(pod: KubeObj, deleted: boolean): void {
    const uid = pod.metadata.uid!;
    if (deleted) {
      serial(() => stopPod(uid));
      return;
    }
    if (pod.metadata.deletionTimestamp) {
      const grace = Number(pod.metadata['deletionGracePeriodSeconds'] ?? 0);
      serial(() => stopPod(uid, { namespace: pod.metadata.namespace!, name: pod.metadata.name, graceSeconds: grace }));
      return;
    }
    const phase = (pod.status as { phase?: string } | undefined)?.phase;
    if (!pods.has(uid) && phase !== 'Succeeded' && phase !== 'Failed') {
      pods.set(uid, { uid } as PodRecord); // claimed, so a second event does not start it twice
      serial(() => startPod(pod));
    }
  }

  void client.listWatch(
    '/api/v1/pods',
    `fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeName}`)}`,
    {
      onSync: (items) => {
        const live = new Set(items.map((p) => p.metadata.uid));
        for (const uid of pods.keys()) if (!live.has(uid)) serial(() => stopPod(uid));
        for (const p of items) onPod(p, false);
      },
      onEvent: (e) => onPod(e.object, e.type === 'DELETED'),
    },
    abort.signal,
  );

  return {
    nodeName,
    devices,
    pluginDir: devices.pluginDir,
    podResourcesSocket: devices.podResourcesSocket,
    processes: () => {
      const out = new Map<string, Map<string, number>>();
      for (const [uid, rec] of pods) {
        const m = new Map<string, number>();
        for (const [name, s] of rec.containers ?? [])
          if (s.running?.process.pid && !s.terminated) m.set(name, s.running.process.pid);
        out.set(uid, m);
      }
      return out;
    },
    close: async () => {
      closed = true;
      abort.abort();
      clearTimeout(capacityTimer);
      await queue;
      for (const rec of pods.values()) {
        for (const s of rec.containers?.values() ?? []) if (s.running) await stopContainer(s.running, 200);
      }
      await devices.stop();
    },
  };
}
