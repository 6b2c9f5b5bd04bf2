/**
 * Which container holds a set of device IDs, from the kubelet's PodResources `List` (pure).
 *
 * The kubelet records a container's device IDs before it calls PreStartContainer with them, and
 * gives a device ID to one pod at a time. So the holder of exactly these IDs is the container
 * about to start. Two kubelet details make it more than a lookup:
 *
 * - `List` reports app containers and restartable init containers (sidecars), not plain init
 *   containers. An app container may reuse a finished init container's devices (the kubelet's
 *   device reuse), so an init container's IDs show up inside an app container of its pod.
 * - So when no listed container holds exactly these IDs, a listed container holding some of them
 *   names the pod, and the one GPU init container of that pod that asks this many core is the
 *   holder. Anything less certain is a refusal that names the pods.
 */
import type { ListPodResourcesResponse } from '../kubelet/protocol.js';
import type { GpuContainerView } from './pod-view.js';

export type Listed = { namespace: string; name: string; container: string };

export type HolderResult =
  | { ok: true; namespace: string; name: string; container: string }
  | { ok: false; code: 'no-holder' | 'several-holders'; message: string; pods: { namespace: string; name: string }[] };

export function sameSet(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x));
}

/** Listed containers whose `resource` devices are exactly these IDs, and those holding some of them. */
export function holdersOf(
  listed: ListPodResourcesResponse,
  resource: string,
  deviceIds: readonly string[],
): { exact: Listed[]; partial: Listed[] } {
  const wanted = new Set(deviceIds);
  const exact: Listed[] = [];
  const partial: Listed[] = [];
  for (const p of listed.pod_resources) {
    for (const c of p.containers) {
      for (const dev of c.devices) {
        if (dev.resource_name !== resource) continue;
        const who = { namespace: p.namespace, name: p.name, container: c.name };
        if (sameSet(dev.device_ids, deviceIds)) exact.push(who);
        else if (dev.device_ids.some((id) => wanted.has(id))) partial.push(who);
      }
    }
  }
  return { exact, partial };
}

const describeIds = (ids: readonly string[]) => {
  const sorted = [...ids].sort();
  return sorted.length <= 4 ? sorted.join(', ') : `${sorted.slice(0, 3).join(', ')} … ${sorted.length} devices`;
};

const who = (l: Listed) => `${l.namespace}/${l.name} container ${l.container}`;

/**
 * The one container holding `deviceIds`. `initContainersOf` gives a pod's GPU init containers
 * (from its spec), for the device-reuse case.
 */
export function resolveHolder(input: {
  listed: ListPodResourcesResponse;
  resource: string;
  deviceIds: readonly string[];
  nodeName: string;
  initContainersOf: (namespace: string, name: string) => readonly GpuContainerView[] | undefined;
  /** Whether a container asks exactly these devices, and that in words (`10 core`); default: vcuda-core. */
  asks?: { matches: (c: GpuContainerView) => boolean; words: string };
}): HolderResult {
  const asks = input.asks ?? {
    matches: (c: GpuContainerView) => c.core === input.deviceIds.length,
    words: `${input.deviceIds.length} core`,
  };
  const { exact, partial } = holdersOf(input.listed, input.resource, input.deviceIds);
  const ids = describeIds(input.deviceIds);
  const pods = [...new Map([...exact, ...partial].map((l) => [`${l.namespace}/${l.name}`, l])).values()];
  const refuse = (code: 'no-holder' | 'several-holders', message: string): HolderResult => ({
    ok: false,
    code,
    message,
    pods: pods.map((p) => ({ namespace: p.namespace, name: p.name })),
  });
  if (pods.length > 1 || exact.length > 1) {
    return refuse(
      'several-holders',
      `PreStartContainer on node ${input.nodeName}: the kubelet reports devices [${ids}] on ` +
        `${[...exact, ...partial].map(who).join('; ')}; a device belongs to one container, so refusing to start any of them`,
    );
  }
  if (exact.length === 1) return { ok: true, ...(exact[0] as Listed) };
  const pod = pods[0];
  if (!pod) {
    return refuse(
      'no-holder',
      `PreStartContainer on node ${input.nodeName}: no container holds devices [${ids}] in the kubelet's ` +
        'PodResources; refusing to start a container vcuda cannot tie to its pod',
    );
  }
  // Device reuse: an app container of this pod holds some of the IDs; the holder is an init container.
  const inits = (input.initContainersOf(pod.namespace, pod.name) ?? []).filter((c) => c.isInit && asks.matches(c));
  if (inits.length === 1) return { ok: true, namespace: pod.namespace, name: pod.name, container: inits[0]!.name };
  return refuse(
    'no-holder',
    `PreStartContainer on node ${input.nodeName}: devices [${ids}] are partly held by ${partial.map(who).join('; ')} ` +
      `and no single GPU init container of ${pod.namespace}/${pod.name} asks ${asks.words} ` +
      `(${inits.length} do); refusing to guess which container starts`,
  );
}
