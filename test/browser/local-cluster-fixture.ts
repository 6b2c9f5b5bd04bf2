/**
 * The small simulated cluster the browser tests of `vcuda local`'s dashboard run: two nodes of two
 * 40 GiB cards, and a research namespace that may hold half a card; and the GPU pods they create.
 */
import type { ClusterSpec } from '../../sim/cluster-spec.js';

export const twoNodeCluster: ClusterSpec = {
  name: 'local',
  memoryUnitMiB: 1,
  nodes: [
    {
      namePrefix: 'gpu-node',
      count: 2,
      cards: 2,
      model: 'NVIDIA A100-SXM4-40GB',
      memoryMiB: 40960,
      numaNodes: 1,
      nvlink: true,
      labels: {},
      taints: [],
      cpu: '64',
      memory: '512Gi',
      mig: [],
    },
  ],
  // research may hold half a card: share-30 fits, too-big (30 more) does not.
  quotas: { research: { core: 50, memoryMiB: 40960 } },
};

export function gpuPod(namespace: string, name: string, core: number, memoryMiB?: number) {
  const limits: Record<string, string> = { 'nvidia.com/vcuda-core': String(core) };
  if (memoryMiB !== undefined) limits['nvidia.com/vcuda-memory'] = String(memoryMiB);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: { containers: [{ name: 'main', image: 'cuda-app', resources: { limits } }] },
  };
}
