/**
 * The DRA facts `vcuda doctor` judges (dra-judge.ts), read from the API server: which versions of
 * resource.k8s.io it serves, whether vcuda's DeviceClass exists, the driver's ResourceSlices per
 * node, and claims of the class with no allocation together with the Pending pods that wait on
 * them (their PodScheduled condition carries kube-scheduler's reason). The mapping from API
 * objects to facts is pure and exported for tests; the calls take the caller's options (deadline).
 */
import type {
  ApisApi,
  ConfigurationOptions,
  CoreV1Api,
  ResourceV1Api,
  V1Pod,
  ResourceV1ResourceClaim as V1ResourceClaim,
  V1ResourceSlice,
} from '@kubernetes/client-node';
import type { DraClaimFacts, DraFacts, DraSliceFacts, DraWaitingPod } from './dra-judge.js';
import { kube as call, isNotFound } from './kube-call.js';

const GROUP = 'resource.k8s.io';
/** Bounds on what one doctor run lists: enough to judge, never a whole large cluster. */
const LIST_LIMIT = 500;

export type DraClients = { apis: ApisApi; resource: ResourceV1Api; core: CoreV1Api };

/** Per node, the driver's devices and those still shareable as stored (consumable capacity on). */
export function sliceFactsOf(slices: readonly V1ResourceSlice[], driver: string): DraSliceFacts[] {
  const byNode = new Map<string, DraSliceFacts>();
  for (const s of slices) {
    const node = s.spec?.nodeName;
    if (s.spec?.driver !== driver || !node) continue;
    const facts = byNode.get(node) ?? { node, devices: 0, shareable: 0 };
    for (const d of s.spec.devices ?? []) {
      facts.devices += 1;
      if (d.allowMultipleAllocations) facts.shareable += 1;
    }
    byNode.set(node, facts);
  }
  return [...byNode.values()].sort((a, b) => a.node.localeCompare(b.node));
}

/** Whether a claim asks the DeviceClass in any request, exactly or among its alternatives. */
export function asksClass(claim: V1ResourceClaim, deviceClass: string): boolean {
  return (claim.spec?.devices?.requests ?? []).some(
    (r) =>
      r.exactly?.deviceClassName === deviceClass ||
      (r.firstAvailable ?? []).some((sub) => sub.deviceClassName === deviceClass),
  );
}

/** The claims a pod references: by name, or generated from a template (its status names them). */
function claimNamesOf(pod: V1Pod): string[] {
  const named = (pod.spec?.resourceClaims ?? []).flatMap((c) => (c.resourceClaimName ? [c.resourceClaimName] : []));
  const generated = (pod.status?.resourceClaimStatuses ?? []).flatMap((c) =>
    c.resourceClaimName ? [c.resourceClaimName] : [],
  );
  return [...named, ...generated];
}

function waitingPodOf(pod: V1Pod): DraWaitingPod {
  const scheduled = (pod.status?.conditions ?? []).find((c) => c.type === 'PodScheduled' && c.status === 'False');
  return {
    name: pod.metadata?.name ?? '',
    ...(scheduled?.reason ? { reason: scheduled.reason } : {}),
    ...(scheduled?.message ? { message: scheduled.message } : {}),
  };
}

/** Claims of the class with no allocation, each with the unscheduled Pending pods that reference it. */
export function unallocatedClaimsOf(
  claims: readonly V1ResourceClaim[],
  pendingPods: readonly V1Pod[],
  deviceClass: string,
): DraClaimFacts[] {
  const waiting = new Map<string, DraWaitingPod[]>();
  for (const pod of pendingPods) {
    if (pod.spec?.nodeName) continue;
    for (const name of claimNamesOf(pod)) {
      const key = `${pod.metadata?.namespace ?? 'default'}/${name}`;
      waiting.set(key, [...(waiting.get(key) ?? []), waitingPodOf(pod)]);
    }
  }
  return claims
    .filter((c) => !c.status?.allocation && asksClass(c, deviceClass))
    .map((c) => {
      const namespace = c.metadata?.namespace ?? 'default';
      const name = c.metadata?.name ?? '';
      const created = c.metadata?.creationTimestamp;
      return {
        namespace,
        name,
        ...(created ? { createdAt: new Date(created).toISOString() } : {}),
        waitingPods: waiting.get(`${namespace}/${name}`) ?? [],
      };
    })
    .sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`));
}

/** Every DRA fact; resource.k8s.io/v1 objects are read only when the API server serves v1. */
export async function probeDra(k: DraClients, driver: string, options: ConfigurationOptions): Promise<DraFacts> {
  const groups = await call('list API groups', () => k.apis.getAPIVersions(options));
  const group = groups.groups.find((g) => g.name === GROUP);
  const servedVersions = (group?.versions ?? []).map((v) => v.version);
  if (!servedVersions.includes('v1')) return { driver, servedVersions };
  const [deviceClass, slices, claims, pending] = await Promise.all([
    call(`get deviceclass ${driver}`, () => k.resource.readDeviceClass({ name: driver }, options)).then(
      () => true,
      (err: unknown) => (isNotFound(err) ? false : Promise.reject(err)),
    ),
    call('list resourceslices', () => k.resource.listResourceSlice({ limit: LIST_LIMIT }, options)),
    call('list resourceclaims', () => k.resource.listResourceClaimForAllNamespaces({ limit: LIST_LIMIT }, options)),
    call('list pending pods', () =>
      k.core.listPodForAllNamespaces({ fieldSelector: 'status.phase=Pending', limit: LIST_LIMIT }, options),
    ),
  ]);
  return {
    driver,
    servedVersions,
    deviceClass,
    slices: sliceFactsOf(slices.items, driver),
    unallocatedClaims: unallocatedClaimsOf(claims.items, pending.items, driver),
  };
}
