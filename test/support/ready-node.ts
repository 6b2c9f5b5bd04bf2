/**
 * A Node as a kubelet would leave it, for the real-server tiers that run no kubelet: created with
 * its hostname label, then Ready with capacity in its status, and without the not-ready taint
 * kube-apiserver puts on every new node.
 */
import type { KubeClient } from '../../sim/kube-client.js';

/** The Node object to create. */
export function nodeObject(name: string) {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'kubernetes.io/hostname': name } } };
}

/** The status a ready kubelet reports: capacity and a Ready condition as of now. */
export function readyNodeStatus() {
  const allocatable = { pods: '110', cpu: '64', memory: '512Gi' };
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const ready = {
    type: 'Ready',
    status: 'True',
    reason: 'KubeletReady',
    message: 'ready',
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  };
  return { capacity: allocatable, allocatable, conditions: [ready] };
}

/** Creates the Node `name` through `client`, Ready and schedulable. */
export async function readyNode(client: KubeClient, name: string): Promise<void> {
  await client.create('/api/v1/nodes', nodeObject(name));
  await client.mergePatch(`/api/v1/nodes/${name}/status`, { status: readyNodeStatus() });
  await client.mergePatch(`/api/v1/nodes/${name}`, { spec: { taints: null } });
}
