/**
 * One simulated GPU node: its kubelet (device manager, PodResources, containers as processes)
 * and vcuda's real node agent wired to it: device plugins over the kubelet's unix sockets, pods
 * and node through the simulated API server, cards from the cluster description, utilization
 * from the node's fake NVML, host pids mapped to containers through the kubelet's cgroup view
 * (`paths.procRoot`), usage reported to the control plane. The agent can be restarted on its own,
 * as a DaemonSet pod would be.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { JSONWebKeySet } from 'jose';
import type { NodeAgent } from '../../node-agent/agent.js';
import type { AgentLog } from '../../node-agent/agent-log.js';
import { type NodeAgentConfig, parseConfig } from '../../node-agent/config.js';
import type { DraAgent } from '../../node-agent/dra/dra-agent.js';
import { HttpUsageSink } from '../../node-agent/usage.js';
import { UsageBacklog } from '../../node-agent/usage-backlog.js';
import { startWiredAgent, startWiredDraAgent, type WiredAgent } from '../../node-agent/wiring.js';
import { nodeSeedOf, type SimNode } from '../cluster-spec.js';
import type { KubeClient } from '../kube-client.js';
import { kubeConfigFor } from '../kubeconfig.js';
import { type SimKubelet, startKubelet } from '../kubelet/sim-kubelet.js';
import { createStaticMigInstances } from './node-mig.js';
import { openNodeNvml } from './node-nvml.js';
import { SimGpuSource } from './sim-gpu-source.js';

export type SimNodeOptions = {
  client: KubeClient;
  apiUrl: string;
  /** Bearer token the node agent presents (its service account). */
  agentToken?: string;
  /** The CA that signed the API server's certificate, when it serves HTTPS. */
  apiCaPem?: string;
  node: SimNode;
  root: string;
  domain: string;
  memoryUnitMiB: number;
  /** native/build: libvcuda.so and fake/ (the fake driver). */
  nativeBuildDir: string;
  workloadDir?: string;
  jwks: () => Promise<JSONWebKeySet>;
  /** Where the agent reports usage (the control plane's Service), and how often; absent: not reported. */
  usage?: { controlPlaneUrl: string; periodMs?: number };
  /** How often the agent renews its heartbeat on the Node (ms); default 10 s. */
  heartbeatPeriodMs?: number;
  /** `dra`: the agent is a DRA driver (ResourceSlices, the kubelet's DRA plugin) instead of device plugins. */
  agentMode?: 'device-plugin' | 'dra';
  log: AgentLog;
};

export type RunningSimNode = {
  readonly name: string;
  readonly kubelet: SimKubelet;
  /** The current agent's cards (a restarted agent gets a fresh source, as after a process restart). */
  gpu(): SimGpuSource;
  agent(): NodeAgent | undefined;
  /** The agent in DRA mode (`agentMode: 'dra'`). */
  draAgent(): DraAgent | undefined;
  /** Stops the node agent and starts a fresh one (same node, same kubelet). */
  restartAgent(): Promise<void>;
  stopAgent(): Promise<void>;
  close(): Promise<void>;
};

/** Env of every simulated container: the fake driver on the library path. */
export function containerBaseEnv(node: SimNode, nativeBuildDir: string): Record<string, string> {
  return { PATH: '/usr/local/bin:/usr/bin:/bin', LD_LIBRARY_PATH: join(nativeBuildDir, 'fake'), HOSTNAME: node.name };
}

/**
 * The fake driver's description of the whole node: every card, the node's UUID seed and one state
 * file, so all containers on the node share each card's simulated memory and timeline.
 */
export function nodeDriverEnv(node: SimNode, root: string): Record<string, string> {
  const env: Record<string, string> = {
    FAKEGPU_UUID_SEED: String(nodeSeedOf(node.name)),
    FAKEGPU_STATE: join(root, 'fakegpu.state'),
  };
  // The fake driver needs at least one device; a card-less node's containers see none anyway.
  if (node.cards.length > 0) env['FAKEGPU_DEVICES'] = node.cards.map((c) => c.memoryMiB).join(',');
  if (node.cards[0]) env['FAKEGPU_NAME'] = node.cards[0].model;
  // Cards in MIG mode from the node's first moment (the state file is made with them so).
  if (node.group.mig.length > 0) env['FAKEGPU_MIG'] = node.group.mig.map((m) => m.card).join(',');
  return env;
}

/**
 * What the NVIDIA container runtime does with NVIDIA_VISIBLE_DEVICES, for the fake driver: the
 * container enumerates exactly the devices named there, in that order, each with its own UUID
 * (`FAKEGPU_VISIBLE_DEVICES` over the node-wide description). No entry: no device (`none`).
 */
export function visibleDevicesEnv(node: SimNode, root: string, devices: readonly string[]): Record<string, string> {
  return { ...nodeDriverEnv(node, root), FAKEGPU_VISIBLE_DEVICES: devices.length > 0 ? devices.join(',') : 'none' };
}

function usageSink(controlPlaneUrl: string, token: string | undefined): UsageBacklog {
  return new UsageBacklog(new HttpUsageSink(controlPlaneUrl, { token: async () => token }));
}

export async function startSimNode(opts: SimNodeOptions): Promise<RunningSimNode> {
  const { node, root } = opts;
  mkdirSync(root, { recursive: true });
  // Before any agent: its MIG plugins serve the profiles present when it starts.
  createStaticMigInstances(node, root, opts.nativeBuildDir, nodeDriverEnv(node, root));
  const kubelet = await startNodeKubelet(opts);
  let gpu = SimGpuSource.ofNode(node);
  let wired: WiredAgent | undefined;
  let draWired: { agent: DraAgent; stop(): Promise<void> } | undefined;

  async function startAgent(): Promise<void> {
    gpu = SimGpuSource.ofNode(node, driverReadings(opts));
    const kubeConfig = kubeConfigFor(opts.apiUrl, opts.agentToken, opts.apiCaPem);
    const config = agentConfig(opts, kubelet);
    if (config.mode === 'dra') {
      draWired = await startWiredDraAgent(config, {
        kubeConfig,
        gpu,
        ...(opts.usage ? { usageSink: usageSink(opts.usage.controlPlaneUrl, opts.agentToken) } : {}),
        log: opts.log,
      });
      return;
    }
    wired = await startWiredAgent(config, {
      kubeConfig,
      gpu,
      jwks: opts.jwks,
      ...(opts.usage ? { usageSink: usageSink(opts.usage.controlPlaneUrl, opts.agentToken) } : {}),
      log: opts.log,
    });
  }

  async function stopAgent(): Promise<void> {
    const w = wired ?? draWired;
    wired = undefined;
    draWired = undefined;
    await w?.stop();
  }

  await startAgent();
  return {
    name: node.name,
    kubelet,
    gpu: () => gpu,
    agent: () => wired?.agent,
    draAgent: () => draWired?.agent,
    restartAgent: async () => {
      await stopAgent();
      await startAgent();
    },
    stopAgent,
    close: async () => {
      await stopAgent().catch(() => undefined);
      await kubelet.close();
    },
  };
}

/** The node's kubelet: its containers run with the fake driver, seeing the devices they were given. */
function startNodeKubelet(opts: SimNodeOptions): Promise<SimKubelet> {
  const { node, root } = opts;
  return startKubelet({
    client: opts.client,
    nodeName: node.name,
    root: join(root, 'kubelet'),
    labels: { ...node.group.labels, 'nvidia.com/gpu.product': node.cards[0]?.model.replaceAll(' ', '-') ?? 'none' },
    taints: node.group.taints,
    capacity: { cpu: node.group.cpu, memory: node.group.memory },
    runtime: {
      ...(opts.workloadDir ? { workloadDir: opts.workloadDir } : {}),
      baseEnv: containerBaseEnv(node, opts.nativeBuildDir),
      deviceEnv: (devices) => visibleDevicesEnv(node, root, devices),
      cdiSpecDirs: [join(root, 'cdi')],
      procDir: join(root, 'proc'),
    },
    log: opts.log.info,
  });
}

/** The node's fake NVML for utilization; without it the cards read as unused (no usage). */
function driverReadings(opts: SimNodeOptions) {
  const { node, root } = opts;
  try {
    return openNodeNvml(node, root, opts.nativeBuildDir, nodeDriverEnv(node, root));
  } catch (err) {
    opts.log.warn({ err }, `${node.name}: fake NVML unusable, no utilization`);
    return undefined;
  }
}

/** The agent's configuration as its DaemonSet would give it, every host path under the node's root. */
function agentConfig(opts: SimNodeOptions, kubelet: SimKubelet): NodeAgentConfig {
  const { node, root } = opts;
  const libvcuda = join(opts.nativeBuildDir, 'libvcuda.so');
  return parseConfig({
    flags: {
      nodeName: node.name,
      resourceDomain: opts.domain,
      memoryUnitMiB: opts.memoryUnitMiB,
      kubelet: {
        devicePluginDir: kubelet.pluginDir,
        podResourcesSocket: kubelet.podResourcesSocket,
        registerRetryMs: 200,
      },
      paths: {
        containersDir: join(root, 'containers'),
        cdiSpecDir: join(root, 'cdi'),
        libvcudaHostPath: existsSync(libvcuda) ? libvcuda : join(root, 'libvcuda.so.missing'),
        preloadHostPath: join(root, 'ld.so.preload'),
        devDir: join(root, 'dev'),
        sysfsRoot: join(root, 'sys'),
        // The kubelet's cgroup view of its containers: NVML's host pids → pods.
        procRoot: join(root, 'proc'),
        jwksPath: join(root, 'jwks.json'),
      },
      ...(opts.usage ? { controlPlaneUrl: opts.usage.controlPlaneUrl } : {}),
      ...(opts.usage?.periodMs ? { usagePeriodMs: opts.usage.periodMs } : {}),
      mig: {
        shared: node.group.mig.filter((m) => m.shared).map((m) => ({ card: m.card })),
        dynamicCards: node.group.mig.filter((m) => m.dynamic).map((m) => m.card),
        // Beside the fake driver's state file: both go with the node's root, as a reboot clears both.
        checkpointPath: join(root, 'dynamic-mig.json'),
      },
      heartbeatPeriodMs: opts.heartbeatPeriodMs ?? 10_000,
      // Housekeeping gives back a dynamic MIG instance whose last pod ended: within seconds here,
      // where people watch it go, rather than the minute a real node may take.
      ...(node.group.mig.some((m) => m.dynamic) ? { housekeepingPeriodMs: 3_000 } : {}),
      inventoryCheckMs: 2_000,
      ...(opts.agentMode === 'dra'
        ? { mode: 'dra', dra: { pluginsRegistryDir: kubelet.dra.registryDir, pluginsDir: kubelet.dra.pluginsDir } }
        : {}),
    },
  });
}
