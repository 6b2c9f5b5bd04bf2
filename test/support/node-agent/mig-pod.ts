/**
 * A pod asking whole MIG instances, as the extender leaves it bound: container `main` asks `count`
 * instances of `profile` and its signed grant names `cards` (static instances by `MIG-` UUID, or
 * dynamic placements by their key). Stored in the harness's cluster; returns the kubelet's view.
 */
import {
  type Assignment,
  type CardGrant,
  MIB,
  migPlacementKey,
  migResourceName,
  signAssignment,
  vcudaAnnotations,
} from '../../../contract/index.js';
import type { PodObject } from '../../../node-agent/allocation/pod-view.js';
import type { GpuSource } from '../../../node-agent/nvml/gpu-source.js';
import type { KubeletPod } from '../../../sim/kubelet/device-manager.js';
import { type Harness, NODE } from './agent-harness.js';

export function bindMigGrantPod(
  h: Harness,
  name: string,
  profile: string,
  cards: CardGrant[],
  count = cards.length,
): Promise<KubeletPod> {
  return bindGrantPod(h, name, cards, { [migResourceName(h.names, profile)]: count }, 100);
}

/**
 * A pod whose container `main` requests `requests` and whose signed grant names `cards` with
 * `coreLimit`, as the extender leaves it bound (stored in the harness's cluster); the kubelet's view.
 */
export async function bindGrantPod(
  h: Harness,
  name: string,
  cards: CardGrant[],
  requests: Record<string, number>,
  coreLimit: number,
): Promise<KubeletPod> {
  const uid = `uid-${name}`;
  const assignment: Assignment = {
    v: 1,
    pod: { uid, namespace: 'default', name },
    node: NODE,
    cluster: 'test',
    containers: [{ name: 'main', isInit: false, cards, coreLimit, mode: 'hard' }],
  };
  const token = await signAssignment(assignment, h.key, {
    nowSeconds: Math.floor(h.nowMs.value / 1000),
    ttlSeconds: 300,
  });
  const limits = Object.fromEntries(Object.entries(requests).map(([k, v]) => [k, String(v)]));
  const pod: PodObject = {
    metadata: {
      name,
      namespace: 'default',
      uid,
      annotations: {
        [vcudaAnnotations.assignment]: token,
        [vcudaAnnotations.assignedNode]: NODE,
        [vcudaAnnotations.assignedAt]: new Date(h.nowMs.value).toISOString(),
      },
    },
    spec: { nodeName: NODE, containers: [{ name: 'main', resources: { limits, requests: limits } }] },
    status: { phase: 'Pending' },
  };
  h.cluster.put(pod);
  return { namespace: 'default', name, containers: [{ name: 'main', isInit: false, requests }] };
}

/** The dynamic grant of `profile` at `start` on card `card`, as the extender signs it (its size and memory from NVML's table). */
export function dynamicMigGrant(
  gpu: Pick<GpuSource, 'listCards' | 'migLayout'>,
  card: number,
  profile: string,
  start: number,
): CardGrant {
  const p = gpu.migLayout?.(card)?.profiles.find((x) => x.profile === profile);
  const parent = gpu.listCards()[card]?.uuid as string;
  return {
    uuid: migPlacementKey({ parent, profile, start }),
    core: 100,
    memoryBytes: (p?.memoryMiB ?? 0) * MIB,
    mig: { parent, profile, start, size: p?.memorySlices ?? 0, dynamic: true },
  };
}
