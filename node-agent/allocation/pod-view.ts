/**
 * The parts of a pod the allocation path reads, taken from the Kubernetes object once (pure).
 * GPU containers are listed in the order the kubelet allocates them: init containers, then
 * app containers, each in spec order, skipping those that ask neither vcuda-core nor a MIG instance.
 */
import {
  type ContainerGrant,
  migProfileOfResource,
  parseWholeQuantity,
  peekAssignment,
  type ResourceNames,
  vcudaAnnotations,
} from '../../contract/index.js';

/**
 * A container asking vcuda-core (`core` devices), or whole MIG instances of one profile (`mig`,
 * `core` 0): the two never meet in one container (the webhook refuses it).
 */
export type GpuContainerView = {
  name: string;
  isInit: boolean;
  core: number;
  mig?: { profile: string; count: number };
};

/** One pod as the agent reads it; shared by every reader of the watch cache, so never mutated. */
export type PodView = {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly nodeName: string;
  readonly annotations: Readonly<Record<string, string>>;
  readonly gpuContainers: readonly GpuContainerView[];
  /** Runtime container id (without the `containerd://` prefix) by container name, once running. */
  readonly containerIds: Readonly<Record<string, string>>;
  /** Succeeded/Failed pods or pods being deleted start nothing more. */
  readonly isFinished: boolean;
  /**
   * The grants its assignment annotation claims, decoded once per pod version and NOT verified:
   * only for readers whose answer is cosmetic (GetPreferredAllocation's steering).
   */
  readonly claimedGrants: readonly ContainerGrant[];
};

type ContainerSpec = {
  name: string;
  resources?: { limits?: Record<string, unknown> | null; requests?: Record<string, unknown> | null } | null;
};

export type PodObject = {
  metadata?: {
    uid?: string;
    namespace?: string;
    name?: string;
    annotations?: Record<string, string> | null;
    deletionTimestamp?: unknown;
  } | null;
  spec?: {
    nodeName?: string | null;
    containers?: ContainerSpec[] | null;
    initContainers?: ContainerSpec[] | null;
  } | null;
  status?: {
    phase?: string | null;
    containerStatuses?: { name: string; containerID?: string | null }[] | null;
    initContainerStatuses?: { name: string; containerID?: string | null }[] | null;
  } | null;
};

/** The whole MIG instances a container asks (its first MIG resource), or undefined. */
function migOf(c: ContainerSpec, names: ResourceNames): GpuContainerView['mig'] {
  for (const [key, raw] of Object.entries(c.resources?.limits ?? c.resources?.requests ?? {})) {
    const profile = migProfileOfResource(names, key);
    const q = profile === undefined ? undefined : parseWholeQuantity(raw);
    if (profile !== undefined && q?.ok && q.value > 0) return { profile, count: q.value };
  }
  return undefined;
}

function coreOf(c: ContainerSpec, names: ResourceNames): number {
  const raw = c.resources?.limits?.[names.core] ?? c.resources?.requests?.[names.core];
  if (raw === undefined || raw === null) return 0;
  const q = parseWholeQuantity(raw);
  return q.ok && q.value > 0 ? q.value : 0;
}

/** `previous`: the same pod's last view, whose claimed grants are kept while its token is unchanged. */
export function toPodView(pod: PodObject, names: ResourceNames, previous?: PodView): PodView {
  const gpuContainers: GpuContainerView[] = [];
  for (const [list, isInit] of [
    [pod.spec?.initContainers ?? [], true],
    [pod.spec?.containers ?? [], false],
  ] as const) {
    for (const c of list) {
      const core = coreOf(c, names);
      const mig = core > 0 ? undefined : migOf(c, names);
      if (core > 0) gpuContainers.push({ name: c.name, isInit, core });
      else if (mig) gpuContainers.push({ name: c.name, isInit, core: 0, mig });
    }
  }
  const phase = pod.status?.phase ?? '';
  const containerIds: Record<string, string> = {};
  for (const st of [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])]) {
    const id = st.containerID?.replace(/^[a-z-]+:\/\//, '');
    if (id) containerIds[st.name] = id;
  }
  return {
    uid: pod.metadata?.uid ?? '',
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    nodeName: pod.spec?.nodeName ?? '',
    annotations: { ...(pod.metadata?.annotations ?? {}) },
    gpuContainers,
    containerIds,
    isFinished: phase === 'Succeeded' || phase === 'Failed' || Boolean(pod.metadata?.deletionTimestamp),
    claimedGrants: claimedGrantsOf(pod.metadata?.annotations?.[vcudaAnnotations.assignment], previous),
  };
}

function claimedGrantsOf(token: string | undefined, previous: PodView | undefined): readonly ContainerGrant[] {
  if (previous && token === previous.annotations[vcudaAnnotations.assignment]) return previous.claimedGrants;
  return (token && peekAssignment(token)?.containers) || [];
}

export function podKey(p: { namespace: string; name: string }): string {
  return `${p.namespace}/${p.name}`;
}

export function isAllocatedByAnnotation(pod: PodView): boolean {
  return Boolean(pod.annotations[vcudaAnnotations.allocatedAt]);
}
