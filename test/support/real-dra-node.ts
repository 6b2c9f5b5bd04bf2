/**
 * One node of vcuda's DRA agent on the real control plane v1.36 (`real-control-plane-136.ts`): the
 * Node object Ready, the DeviceClasses the test needs, and the real agent wired to the API server
 * (publishing its slices) with a kubelet client on its sockets; no kubelet, so a test calls
 * Prepare and Unprepare itself.
 */
import type { DraAgent } from '../../node-agent/dra/dra-agent.js';
import type { GpuSource } from '../../node-agent/nvml/gpu-source.js';
import { startWiredDraAgent } from '../../node-agent/wiring.js';
import type { KubeClient } from '../../sim/kube-client.js';
import { kubeConfigFor } from '../../sim/kubeconfig.js';
import { DraKubeletClient, draAgentConfig } from './node-agent/dra-harness.js';
import { recordingLog } from './node-agent/recording-log.js';
import { readyNode } from './ready-node.js';
import { type RealControlPlane, startRealControlPlane136 } from './real-control-plane-136.js';

export type RealDraNode = {
  plane: RealControlPlane;
  client: KubeClient;
  agent: DraAgent;
  kubelet: DraKubeletClient;
  /** Stops the agent and the control plane (the agent's `dir` is the caller's to remove). */
  close: () => Promise<void>;
};

export async function startRealDraNode(opts: {
  nodeName: string;
  /** The agent's root directory. */
  dir: string;
  gpu: GpuSource;
  /** Agent configuration beyond the node name and paths (e.g. `mig`). */
  config?: Record<string, unknown>;
  createDeviceClasses: (client: KubeClient) => Promise<void>;
}): Promise<RealDraNode> {
  const plane = await startRealControlPlane136();
  let wired: Awaited<ReturnType<typeof startWiredDraAgent>> | undefined;
  try {
    await readyNode(plane.client, opts.nodeName);
    await opts.createDeviceClasses(plane.client);
    const config = draAgentConfig(opts.dir, {
      nodeName: opts.nodeName,
      ...(opts.config ? { config: opts.config } : {}),
    });
    wired = await startWiredDraAgent(config, {
      kubeConfig: kubeConfigFor(plane.url),
      gpu: opts.gpu,
      log: recordingLog().log,
    });
  } catch (err) {
    await plane.close();
    throw err;
  }
  const agent = wired;
  const kubelet = new DraKubeletClient(agent.agent);
  return {
    plane,
    client: plane.client,
    agent: agent.agent,
    kubelet,
    close: async () => {
      kubelet.close();
      await agent.stop();
      await plane.close();
    },
  };
}
