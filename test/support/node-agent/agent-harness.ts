/**
 * One node for tests: a fake kubelet, a fake API server, fake GPUs and the real agent, all in a
 * temp directory; plus the extender's part (signing assignments) so a test reads like the path
 * a pod takes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Assignment,
  generateSigningKey,
  jwksOf,
  MIB,
  type ResourceNames,
  resourceNames,
  type SigningKey,
  signAssignment,
  vcudaAnnotations,
} from '../../../contract/index.js';
import { type AgentDeps, type NodeAgent, startNodeAgent } from '../../../node-agent/agent.js';
import type { JwksSource } from '../../../node-agent/allocation/ports.js';
import { type NodeAgentConfig, parseConfig } from '../../../node-agent/config.js';
import type { GpuSource } from '../../../node-agent/nvml/gpu-source.js';
import { FakeCluster } from './fake-cluster.js';
import { FakeGpuSource, type FakeMachine } from './fake-gpu-source.js';
import { FakeKubelet } from './fake-kubelet.js';
import { GpuPodBuilder } from './gpu-pod.js';
import { recordingLog } from './recording-log.js';

export type Harness = {
  root: string;
  names: ResourceNames;
  config: NodeAgentConfig;
  kubelet: FakeKubelet;
  cluster: FakeCluster;
  gpu: FakeGpuSource;
  agent: NodeAgent;
  key: SigningKey;
  nowMs: { value: number };
  pod: (name: string) => GpuPodBuilder;
  /** Signs an assignment for the pod (the extender's bind) and stores the pod as bound. */
  bind: (
    pod: GpuPodBuilder,
    cards: string[][],
    opts?: { node?: string; key?: SigningKey; ttlSeconds?: number; issuedAtMs?: number },
  ) => Promise<void>;
  warnings: string[];
  /** Stops the agent and starts a fresh one on the same node (state from the kubelet and the pods). */
  restartAgent: () => Promise<NodeAgent>;
  close: () => Promise<void>;
};

export const NODE = 'node-a';

export async function startHarness(
  opts: {
    machine?: FakeMachine;
    config?: Record<string, unknown>;
    /** A GpuSource other than the in-memory fake (e.g. NVML over native/'s fake library). */
    gpuSource?: () => GpuSource;
    /** The verification keys the agent reads (default: the harness's signing key). */
    jwks?: JwksSource;
    /** Asked at every agent start: the dynamic MIG step hook of that agent (tests crash it there). */
    dynamicMigFaults?: () => AgentDeps['dynamicMigFaults'];
  } = {},
): Promise<Harness> {
  const root = mkdtempSync(join(tmpdir(), 'vcuda-agent-'));
  const names = resourceNames('nvidia.com');
  const kubelet = await FakeKubelet.start(root);
  const cluster = new FakeCluster(names);
  const gpu = new FakeGpuSource(opts.machine ?? { cards: 2, memoryMiB: 4096 });
  const key = await generateSigningKey('k1');
  const nowMs = { value: Date.parse('2026-01-01T00:00:00Z') };
  // Overrides merge into the temp-dir paths so no test can fall back to the host's real ones.
  const { paths: pathOverrides, ...configOverrides } = (opts.config ?? {}) as { paths?: Record<string, unknown> };
  const config = parseConfig({
    file: {
      nodeName: NODE,
      kubelet: {
        devicePluginDir: kubelet.pluginDir,
        podResourcesSocket: kubelet.podResourcesSocket,
        registerRetryMs: 100,
      },
      paths: {
        containersDir: join(root, 'containers'),
        cdiSpecDir: join(root, 'cdi'),
        preloadHostPath: join(root, 'ld.so.preload'),
        libvcudaHostPath: join(root, 'lib/libvcuda.so'),
        driverLibraries: [
          {
            hostPath: '/usr/lib/x86_64-linux-gnu/libcuda.so.1',
            containerPath: '/usr/lib/x86_64-linux-gnu/libcuda.so.1',
          },
        ],
        ...pathOverrides,
      },
      ...configOverrides,
    },
  });
  const { log, lines: warnings } = recordingLog();
  const { PodResourcesClient } = await import('../../../node-agent/kubelet/pod-resources-client.js');
  const podResources = new PodResourcesClient(kubelet.podResourcesSocket);
  const makeAgent = (source: GpuSource, faults = opts.dynamicMigFaults?.()) =>
    startNodeAgent({
      config,
      gpu: source,
      pods: cluster,
      annotator: cluster,
      events: cluster,
      node: cluster,
      podResources,
      jwks: opts.jwks ?? (async () => jwksOf([key])),
      nowMs: () => nowMs.value,
      log,
      runLoops: false,
      retryDelayMs: 10,
      ...(faults ? { dynamicMigFaults: faults } : {}),
    });
  const machine = opts.machine ?? { cards: 2, memoryMiB: 4096 };
  let agent = await makeAgent(opts.gpuSource?.() ?? gpu);
  let uid = 0;
  const cardsByIndex = agent.health.list();
  const h: Harness = {
    root,
    names,
    config,
    kubelet,
    cluster,
    gpu,
    agent,
    restartAgent: async () => {
      await agent.stop();
      agent = await makeAgent(opts.gpuSource?.() ?? new FakeGpuSource(machine));
      h.agent = agent;
      return agent;
    },
    key,
    nowMs,
    warnings,
    pod: (name) => new GpuPodBuilder(names, name, `uid-${name}-${++uid}`),
    bind: async (pod, cards, o = {}) => {
      const obj = pod.onNode(NODE).obj();
      const containers = [...(obj.spec?.initContainers ?? []), ...(obj.spec?.containers ?? [])];
      const initNames = new Set((obj.spec?.initContainers ?? []).map((c) => c.name));
      const assignment: Assignment = {
        v: 1,
        pod: { uid: pod.uid, namespace: pod.namespace, name: pod.name },
        node: o.node ?? NODE,
        cluster: 'test',
        containers: containers.map((c, i) => {
          const core = Number(c.resources?.limits?.[names.core]);
          const memoryUnits = Number(c.resources?.limits?.[names.memory]);
          const uuids = (cards[i] ?? []).map(
            (u) => cardsByIndex.find((k) => k.uuid === u || String(k.index) === u)?.uuid ?? u,
          );
          return {
            name: c.name,
            isInit: initNames.has(c.name),
            cards: uuids.map((uuid) => ({
              uuid,
              core: Math.min(core, 100),
              memoryBytes: core >= 100 ? (cardsByIndex[0]?.memoryTotalBytes ?? MIB) : memoryUnits * MIB,
            })),
            coreLimit: Math.min(core, 100),
            mode: 'hard' as const,
          };
        }),
      };
      const token = await signAssignment(assignment, o.key ?? key, {
        nowSeconds: Math.floor((o.issuedAtMs ?? nowMs.value) / 1000),
        ttlSeconds: o.ttlSeconds ?? 300,
      });
      cluster.put(
        pod
          .annotate({
            [vcudaAnnotations.assignment]: token,
            [vcudaAnnotations.assignedNode]: o.node ?? NODE,
            [vcudaAnnotations.assignedAt]: new Date(nowMs.value).toISOString(),
          })
          .obj(),
      );
    },
    close: async () => {
      await agent.stop();
      podResources.close();
      await kubelet.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
  return h;
}

/**
 * Binds the pod to `cards`, admits it on the kubelet, and reports it Running with these
 * container runtime ids, as the kubelet does once its containers run.
 */
export async function runPod(
  h: Harness,
  pod: GpuPodBuilder,
  cards: string[][],
  containerIds: Record<string, string>,
): Promise<void> {
  await h.bind(pod, cards);
  await h.kubelet.admitPod(pod.kubelet(false));
  const running = pod.onNode(NODE).obj();
  running.metadata = h.cluster.get(pod.namespace, pod.name)?.metadata ?? null;
  running.status = {
    phase: 'Running',
    containerStatuses: Object.entries(containerIds).map(([name, id]) => ({ name, containerID: `containerd://${id}` })),
  };
  h.cluster.put(running);
}
