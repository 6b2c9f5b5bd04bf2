/**
 * Connects the per-card samplers to what the allocation path knows: which
 * containers hold a share of each card (the records) and which container a host PID belongs to
 * (`/proc/PID/cgroup` → pod UID + runtime id → container name from the pod's status).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PodView } from '../allocation/pod-view.js';
import type { ContainerRecord } from '../allocation/ports.js';
import { readRegionUsage } from '../limits/region-file.js';
import type { ContainerOnCard, ContainerPlacement } from './card-sampler.js';
import { parseProcCgroup } from './cgroup-identity.js';
import type { DriftTarget } from './memory-drift.js';

export function containerKey(podUid: string, container: string): string {
  return `${podUid}/${container}`;
}

/**
 * The records whose pod this node's view still shows: what the samplers measure. A deleted pod's
 * records stay until housekeeping forgets them (a period later), and the samplers went on reading
 * and writing their regions ten times a second for containers that no longer run. A pod leaves the
 * view only when the API server says it is gone.
 */
export function recordsOfShownPods(
  records: readonly ContainerRecord[],
  isShown: (podUid: string) => boolean,
): readonly ContainerRecord[] {
  return records.every((r) => isShown(r.podUid)) ? records : records.filter((r) => isShown(r.podUid));
}

/** Pure over its inputs; `readCgroup` returns `/proc/PID/cgroup`'s text or undefined. */
export function placementOf(
  records: () => readonly ContainerRecord[],
  pods: () => readonly PodView[],
  cardIndexOf: (uuid: string) => number | undefined,
  readCgroup: (pid: number) => string | undefined,
): ContainerPlacement {
  return {
    containersOn(cardIndex: number): ContainerOnCard[] {
      const out: ContainerOnCard[] = [];
      for (const r of records()) {
        r.devices.forEach((d, deviceIndex) => {
          if (cardIndexOf(d.uuid) === cardIndex) {
            out.push({
              key: containerKey(r.podUid, r.container),
              regionPath: r.paths.regionPath,
              deviceIndex,
              ...(d.mode === 'hard' && d.coreLimit >= 100 ? { unmeasured: true } : {}),
            });
          }
        });
      }
      return out;
    },
    containerOfPid(pid: number): string | null {
      const text = readCgroup(pid);
      const id = text === undefined ? null : parseProcCgroup(text);
      if (!id) return null;
      const ours = records().filter((r) => r.podUid === id.podUid);
      if (ours.length === 0) return null;
      const pod = pods().find((p) => p.uid === id.podUid);
      const byId = pod && Object.entries(pod.containerIds).find(([, cid]) => cid === id.containerId)?.[0];
      // A container the pod's status names but that holds no share (a sidecar) is not a GPU container.
      if (byId) return ours.some((r) => r.container === byId) ? containerKey(id.podUid, byId) : null;
      // Before the pod's status names its containers, a pod with one GPU container is unambiguous.
      return ours.length === 1 ? containerKey(id.podUid, (ours[0] as ContainerRecord).container) : null;
    },
  };
}

/** The memory-drift monitor's view of card `cardIndex`: its containers with their metric labels. */
export function driftTargetsOn(
  records: readonly ContainerRecord[],
  cardIndexOf: (uuid: string) => number | undefined,
  cardIndex: number,
): DriftTarget[] {
  return records.flatMap((r) =>
    r.devices.flatMap((d, deviceIndex) =>
      cardIndexOf(d.uuid) === cardIndex
        ? [
            {
              key: containerKey(r.podUid, r.container),
              namespace: r.namespace,
              pod: r.podName,
              container: r.container,
              cardUuid: d.uuid,
              regionPath: r.paths.regionPath,
              deviceIndex,
            },
          ]
        : [],
    ),
  );
}

/**
 * What a region holds on one of its devices: guaranteed bytes plus the burst not known to be on
 * the host (the driver's processes hold resident managed memory too); 0 before any process of the
 * container created the region.
 */
export function regionCharge(regionPath: string, deviceIndex: number): number {
  const u = readRegionUsage(regionPath, deviceIndex + 1)?.[deviceIndex];
  return u ? u.usedBytes + Math.max(0, u.burstBytes - u.burstEvictedBytes) : 0;
}

export function procCgroupReader(procRoot: string): (pid: number) => string | undefined {
  return (pid) => {
    try {
      return readFileSync(join(procRoot, String(pid), 'cgroup'), 'utf8');
    } catch {
      // The process exited since NVML listed it: it belongs to no container now.
      return undefined;
    }
  };
}
