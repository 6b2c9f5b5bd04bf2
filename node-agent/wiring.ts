/**
 * The node agent's Kubernetes- and kubelet-facing wiring, shared by the process (main.ts) and the
 * simulator's node: from the config and the adapters the caller owns (API server credentials, a
 * GpuSource, the JWKS, an optional usage sink), it starts the pod watch, the PodResources client
 * and the API writer, then the agent. Stop order is the reverse of start; a failed start leaves
 * nothing of its own running.
 */
import type * as k8s from '@kubernetes/client-node';
import { resourceNames } from '../contract/index.js';
import { type NodeAgent, startNodeAgent } from './agent.js';
import type { AgentLog } from './agent-log.js';
import type { JwksSource } from './allocation/ports.js';
import type { NodeAgentConfig } from './config.js';
import { type DraAgent, startDraAgent } from './dra/dra-agent.js';
import { KubeResourceApi } from './dra/kube-resource-api.js';
import { KubeWriter, PodWatchCache } from './kube-adapters.js';
import { PodResourcesClient } from './kubelet/pod-resources-client.js';
import type { GpuSource } from './nvml/gpu-source.js';
import type { UsageSink } from './usage.js';

export type AgentAdapters = {
  kubeConfig: k8s.KubeConfig;
  gpu: GpuSource;
  jwks: JwksSource;
  usageSink?: UsageSink;
  log: AgentLog;
};

export type WiredAgent = {
  agent: NodeAgent;
  /** Stops the agent, then the pod watch and the PodResources client (the GpuSource is the caller's). */
  stop(): Promise<void>;
};

export async function startWiredAgent(config: NodeAgentConfig, adapters: AgentAdapters): Promise<WiredAgent> {
  const { kubeConfig, log } = adapters;
  const pods = new PodWatchCache(kubeConfig, config.nodeName, resourceNames(config.resourceDomain), log);
  const podResources = new PodResourcesClient(config.kubelet.podResourcesSocket);
  const closeAdapters = () => {
    pods.stop();
    podResources.close();
  };
  try {
    await pods.start();
    const writer = new KubeWriter(kubeConfig, config.nodeName, log);
    const agent = await startNodeAgent({
      config,
      gpu: adapters.gpu,
      pods,
      annotator: writer,
      events: writer,
      node: writer,
      podResources,
      jwks: adapters.jwks,
      ...(adapters.usageSink ? { usageSink: adapters.usageSink } : {}),
      log,
    });
    return {
      agent,
      stop: async () => {
        await agent.stop();
        closeAdapters();
      },
    };
  } catch (err) {
    closeAdapters();
    throw err;
  }
}

/**
 * DRA mode (`mode: dra`): the agent as a kubelet DRA driver over resource.k8s.io/v1. No pod watch,
 * PodResources or JWKS: a claim's allocation, checked against this node's slice, is the grant. The
 * usage sink, when given, takes the prepared claims' usage.
 */
export async function startWiredDraAgent(
  config: NodeAgentConfig,
  adapters: Pick<AgentAdapters, 'kubeConfig' | 'gpu' | 'usageSink' | 'log'>,
): Promise<{ agent: DraAgent; stop(): Promise<void> }> {
  const api = new KubeResourceApi(adapters.kubeConfig);
  // The slice is owned by its Node; without the Node (not created yet) it is written unowned.
  const nodeUid = await api.nodeUid(config.nodeName).catch((err) => {
    adapters.log.warn({ err }, `reading Node ${config.nodeName} failed; its ResourceSlice has no owner`);
    return undefined;
  });
  const agent = await startDraAgent({
    config,
    gpu: adapters.gpu,
    claims: api,
    slices: api,
    node: new KubeWriter(adapters.kubeConfig, config.nodeName, adapters.log),
    ...(nodeUid ? { nodeUid } : {}),
    ...(adapters.usageSink ? { usageSink: adapters.usageSink } : {}),
    log: adapters.log,
  });
  return { agent, stop: () => agent.stop() };
}
