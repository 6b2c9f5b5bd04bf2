/**
 * One simulated node's kubelet: registers its Node (standard labels, cpu/memory/pods capacity,
 * device-plugin resources as their plugins advertise them), watches the pods bound to it, admits
 * each through the device manager (Allocate at admission, PreStartContainer as each container
 * starts), runs its containers as host processes, reports pod status, and on deletion stops the
 * processes, frees the devices and removes the pod, as the kubelet does.
 *
 * `startKubelet` composes starters that each own one resource and return its closer; it starts
 * them in the order below and closes them in reverse.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient, KubeObj } from '../kube-client.js';
import type { RuntimeConfig } from './container-runtime.js';
import { DeviceManager } from './device-manager.js';
import { DraManager } from './dra-manager.js';
import { POD_WORKER_BACKOFF_MS, PodWorkers } from './pod-lifecycle.js';

export type KubeletOptions = {
  client: KubeClient;
  nodeName: string;
  /** Root of this node's kubelet directories (device-plugins/, pod-resources/, plugins_registry/, plugins/, logs/). */
  root: string;
  labels?: Record<string, string>;
  taints?: { key: string; value?: string; effect: string }[];
  capacity?: { cpu?: string; memory?: string; pods?: string };
  runtime: Omit<RuntimeConfig, 'logDir'>;
  /** Cap on the termination grace period, so deletions finish in a test's time. */
  maxGraceMs?: number;
  /** Wait before a refused PreStartContainer is tried again (the pod worker's backoff, 10 s). */
  preStartRetryMs?: number;
  log?: (msg: string) => void;
};

export type SimKubelet = {
  readonly nodeName: string;
  readonly devices: DeviceManager;
  readonly dra: DraManager;
  /** Directory device plugins register in (`kubelet.sock` lives here). */
  readonly pluginDir: string;
  readonly podResourcesSocket: string;
  /** Pod uid → host pid of each running container, for tests that check processes. */
  processes(): Map<string, Map<string, number>>;
  close(): Promise<void>;
};

type Closer = () => void | Promise<void>;

/** Creates (or keeps) the Node and posts a Ready status with its capacity, as a starting kubelet does. */
export async function registerNode(opts: KubeletOptions): Promise<void> {
  const { client, nodeName } = opts;
  const labels = {
    'kubernetes.io/hostname': nodeName,
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    'beta.kubernetes.io/os': 'linux',
    'beta.kubernetes.io/arch': 'amd64',
    ...(opts.labels ?? {}),
  };
  const spec = opts.taints?.length ? { taints: opts.taints } : {};
  await client
    .create('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName, labels }, spec })
    .catch((e: { code?: number }) => {
      if (e.code !== 409) throw e;
    });
  const cap = {
    cpu: opts.capacity?.cpu ?? '64',
    memory: opts.capacity?.memory ?? '512Gi',
    pods: opts.capacity?.pods ?? '110',
  };
  const now = new Date().toISOString();
  const ready = { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' };
  await client.mergePatch(`/api/v1/nodes/${nodeName}/status`, {
    status: {
      capacity: cap,
      allocatable: cap,
      conditions: [{ ...ready, lastHeartbeatTime: now, lastTransitionTime: now }],
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

/** Device-plugin resources appear in capacity as their plugins advertise healthy devices (debounced). */
function publishPluginCapacity(client: KubeClient, nodeName: string, devices: DeviceManager): Closer {
  let timer: NodeJS.Timeout | undefined;
  const unsubscribe = devices.onChange(() => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const counts = Object.fromEntries(devices.resources().map((r) => [r, String(devices.healthyCount(r))]));
      void client
        .strategicPatch(`/api/v1/nodes/${nodeName}/status`, { status: { capacity: counts, allocatable: counts } })
        .catch(() => undefined);
    }, 20);
  });
  return () => {
    unsubscribe();
    clearTimeout(timer);
  };
}

/**
 * Node-level extended resources (patched into status.capacity by others) become allocatable, as
 * the kubelet's node status loop makes them.
 */
function mirrorExtendedCapacity(client: KubeClient, nodeName: string): Closer {
  const abort = new AbortController();
  const mirror = (node: KubeObj) => {
    const st = (node.status ?? {}) as { capacity?: Record<string, string>; allocatable?: Record<string, string> };
    const missing: Record<string, string> = {};
    for (const [k, v] of Object.entries(st.capacity ?? {}))
      if (k.includes('/') && st.allocatable?.[k] !== v) missing[k] = v;
    if (Object.keys(missing).length === 0) return;
    void client
      .strategicPatch(`/api/v1/nodes/${nodeName}/status`, { status: { allocatable: missing } })
      .catch(() => undefined);
  };
  const handlers = {
    onSync: (items: KubeObj[]) => items.forEach(mirror),
    onEvent: (e: { type: string; object: KubeObj }) => (e.type === 'DELETED' ? undefined : mirror(e.object)),
  };
  const selector = `fieldSelector=${encodeURIComponent(`metadata.name=${nodeName}`)}`;
  void client.listWatch('/api/v1/nodes', selector, handlers, abort.signal);
  return () => abort.abort();
}

/** Watches the pods bound to the node and hands them to the pod workers. */
function watchPods(client: KubeClient, nodeName: string, workers: PodWorkers): Closer {
  const abort = new AbortController();
  const selector = `fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeName}`)}`;
  const handlers = {
    onSync: (items: KubeObj[]) => workers.onSync(items),
    onEvent: (e: { type: string; object: KubeObj }) => workers.onPod(e.object, e.type === 'DELETED'),
  };
  void client.listWatch('/api/v1/pods', selector, handlers, abort.signal);
  return () => abort.abort();
}

/** Runs the closers in reverse order of start. */
async function closeAll(closers: Closer[]): Promise<void> {
  for (const close of closers.reverse()) await close();
}

export async function startKubelet(opts: KubeletOptions): Promise<SimKubelet> {
  const { client, nodeName } = opts;
  const log = opts.log ?? (() => {});
  const logDir = join(opts.root, 'logs');
  mkdirSync(logDir, { recursive: true });
  const closers: Closer[] = [];
  const devices = await DeviceManager.start(opts.root);
  closers.push(() => devices.stop());
  try {
    await registerNode(opts);
    closers.push(publishPluginCapacity(client, nodeName, devices));
    closers.push(mirrorExtendedCapacity(client, nodeName));
    const dra = DraManager.start(opts.root, client, log);
    closers.push(() => dra.stop());
    const runtime: RuntimeConfig = { ...opts.runtime, logDir };
    const workers = new PodWorkers({
      client,
      nodeName,
      devices,
      dra,
      runtime,
      maxGraceMs: opts.maxGraceMs ?? 2000,
      preStartRetryMs: opts.preStartRetryMs ?? POD_WORKER_BACKOFF_MS,
      log,
    });
    closers.push(() => workers.close());
    closers.push(watchPods(client, nodeName, workers));
    return {
      nodeName,
      devices,
      dra,
      pluginDir: devices.pluginDir,
      podResourcesSocket: devices.podResourcesSocket,
      processes: () => workers.processes(),
      close: () => closeAll(closers),
    };
  } catch (err) {
    await closeAll(closers);
    throw err;
  }
}
