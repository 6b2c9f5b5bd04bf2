/**
 * Who the kubelet says holds a set of device IDs, from PodResources `List`. Concurrent callers
 * share one in-flight List: the kubelet rate-limits it (100 QPS, burst 10), and twenty containers
 * starting at once must not trip that.
 */
import type { ListPodResourcesResponse } from '../device-plugin/protocol.js';
import type { PodResourcesLister } from './ports.js';

export type DeviceOwner = { namespace: string; name: string; container: string };

export function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x));
}

/** Containers whose `resource` devices are exactly `deviceIds` (pure). */
export function ownersOf(
  listed: ListPodResourcesResponse,
  resource: string,
  deviceIds: readonly string[],
): DeviceOwner[] {
  const owners: DeviceOwner[] = [];
  for (const p of listed.pod_resources) {
    for (const c of p.containers) {
      for (const dev of c.devices) {
        if (dev.resource_name === resource && sameSet(dev.device_ids, deviceIds)) {
          owners.push({ namespace: p.namespace, name: p.name, container: c.name });
        }
      }
    }
  }
  return owners;
}

export class SharedPodResources {
  private inflight: Promise<ListPodResourcesResponse> | undefined;

  constructor(private readonly lister: PodResourcesLister) {}

  /** A List that may have started before this call (shared). */
  shared(): Promise<ListPodResourcesResponse> {
    this.inflight ??= this.lister.list().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  /** A List started by this call. */
  fresh(): Promise<ListPodResourcesResponse> {
    return this.lister.list();
  }
}
