/**
 * The DRA node side on the real control plane v1.36 (`../shared/kubernetes-1.36/`: kube-apiserver,
 * kube-scheduler, kube-controller-manager): one simulated node whose kubelet drives vcuda's real
 * node agent in DRA mode over its unix sockets (registration, NodePrepareResources before a pod's
 * containers start, NodeUnprepareResources when it ends), the cards from the fake NVML, containers
 * run as host processes through libvcuda.so's limit files. vcuda's DeviceClass is created. Tests
 * create claims and pods; the real scheduler allocates, the real controller frees.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DeviceLimit, decodeLimitConfig } from '../../contract/index.js';
import type { AgentLog } from '../../node-agent/agent-log.js';
import { type ClusterSpec, expandNodes, parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeClient, podPath } from '../../sim/kube-client.js';
import { NATIVE_BUILD_DIR, WORKLOAD_DIR } from '../../sim/local-cluster.js';
import { type RunningSimNode, startSimNode } from '../../sim/node/sim-node.js';
import { recordingLog } from './node-agent/recording-log.js';
import { type RealControlPlane, startRealControlPlane136 } from './real-control-plane-136.js';

export const DRA_GV = '/apis/resource.k8s.io/v1';
export const DRA_DRIVER = 'gpu.vcuda.io';

export type DraNodeTier = {
  plane: RealControlPlane;
  client: KubeClient;
  node: RunningSimNode;
  /** The node's own root: `containers/` (limit files), `cdi/`, `kubelet/logs/` (each container's limit mirror). */
  root: string;
  /** The agent's warnings and errors, as text. */
  lines: string[];
  close(): Promise<void>;
};

/** vcuda's DeviceClass, selecting the driver's devices. */
export async function createVcudaDeviceClass(client: KubeClient): Promise<void> {
  await client.create(`${DRA_GV}/deviceclasses`, {
    metadata: { name: DRA_DRIVER },
    spec: { selectors: [{ cel: { expression: `device.driver == "${DRA_DRIVER}"` } }] },
  });
}

/**
 * Starts a simulated node of `spec` per entry (in this order), each under `<root>/<node name>/`
 * with its kubelet and vcuda's real agent in DRA mode, against `plane`.
 */
export async function startDraSimNodes(
  plane: RealControlPlane,
  root: string,
  spec: ClusterSpec,
  log: AgentLog,
): Promise<RunningSimNode[]> {
  const nodes: RunningSimNode[] = [];
  try {
    for (const node of expandNodes(spec)) {
      nodes.push(
        await startSimNode({
          client: plane.client,
          apiUrl: plane.url,
          node,
          root: join(root, node.name),
          domain: 'nvidia.com',
          memoryUnitMiB: spec.memoryUnitMiB,
          nativeBuildDir: NATIVE_BUILD_DIR,
          ...(existsSync(WORKLOAD_DIR) ? { workloadDir: WORKLOAD_DIR } : {}),
          jwks: async () => ({ keys: [] }),
          agentMode: 'dra',
          log,
        }),
      );
      // kube-apiserver taints every new Node not-ready; node-lifecycle-controller is off here.
      await plane.client.mergePatch(`/api/v1/nodes/${node.name}`, { spec: { taints: null } });
    }
    return nodes;
  } catch (e) {
    for (const n of nodes) await n.close().catch(() => undefined);
    throw e;
  }
}

/** Starts the control plane, the DeviceClass and node `nodeName` with `cards` fake cards of `memoryMiB`. */
export async function startDraNodeTier(opts: {
  nodeName: string;
  cards: number;
  memoryMiB: number;
}): Promise<DraNodeTier> {
  const plane = await startRealControlPlane136();
  const dir = mkdtempSync(join(tmpdir(), 'dra-tier-'));
  const { log, lines } = recordingLog();
  let node: RunningSimNode | undefined;
  try {
    await createVcudaDeviceClass(plane.client);
    const spec = parseClusterSpec({
      name: 'dra-tier',
      nodes: [{ name: opts.nodeName, count: 1, cards: opts.cards, memoryMiB: opts.memoryMiB }],
    });
    node = (await startDraSimNodes(plane, dir, spec, log))[0];
    if (!node) throw new Error('the cluster spec has no node');
  } catch (e) {
    await plane.close();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const running = node;
  return {
    plane,
    client: plane.client,
    node: running,
    root: join(dir, opts.nodeName),
    lines,
    close: async () => {
      await running.close();
      await plane.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Deletes a pod at once (grace 0 in the body: kube-apiserver ignores query options beside one). */
export async function deletePodNow(client: KubeClient, namespace: string, name: string): Promise<void> {
  await client.request('DELETE', podPath(namespace, name), {
    kind: 'DeleteOptions',
    apiVersion: 'v1',
    gracePeriodSeconds: 0,
  });
}

/**
 * The limit a running container of the tier reads: the sim runtime's mirror of the limit file the
 * claim's CDI spec mounted (its region path translated to the host), or undefined before it starts.
 */
export function containerLimit(
  tier: DraNodeTier,
  podUid: string,
  container: string,
): { regionPath: string; devices: DeviceLimit[] } | undefined {
  const mirror = join(tier.root, 'kubelet', 'logs', `${podUid}-${container}.vcuda-config`);
  if (!existsSync(mirror)) return undefined;
  const { regionPath, devices } = decodeLimitConfig(readFileSync(mirror));
  return { regionPath, devices };
}
