/**
 * The resource types the simulated API server serves, and the discovery documents built from
 * them (`/api`, `/api/v1`, `/apis`, `/apis/<group>/<version>`) that kubectl reads before anything else.
 */
export type ResourceType = {
  readonly group: string;
  readonly version: string;
  /** Plural, lower case, as in the URL: `pods`. */
  readonly resource: string;
  readonly kind: string;
  readonly singular: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  /** Subresources served: `status`, `binding`. */
  readonly subresources: readonly string[];
  /** The first Kubernetes minor version that serves it (DRA's `resource.k8s.io/v1`: 36); 0 for all. */
  readonly sinceMinor: number;
};

/** Every type, whatever version the server plays: what in-process callers (not HTTP clients) see. */
export const EVERY_MINOR = Number.POSITIVE_INFINITY;

/** A `scale` subresource is an autoscaling/v1 Scale, which discovery names (kubectl's scale client reads it there). */
const SCALE = {
  singularName: '',
  group: 'autoscaling',
  version: 'v1',
  kind: 'Scale',
  verbs: ['get', 'patch', 'update'],
};

const SUBRESOURCE_VERBS: Record<string, string[]> = {
  binding: ['create'],
  log: ['get'],
  exec: ['create', 'get'],
  attach: ['create', 'get'],
  portforward: ['create', 'get'],
};

const SUBRESOURCE_KINDS: Record<string, string> = {
  binding: 'Binding',
  exec: 'PodExecOptions',
  attach: 'PodAttachOptions',
  portforward: 'PodPortForwardOptions',
};

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function type(
  group: string,
  version: string,
  resource: string,
  kind: string,
  namespaced: boolean,
  opts: { shortNames?: string[]; subresources?: string[]; sinceMinor?: number } = {},
): ResourceType {
  return {
    group,
    version,
    resource,
    kind,
    singular: kind.toLowerCase(),
    namespaced,
    shortNames: opts.shortNames ?? [],
    subresources: opts.subresources ?? [],
    sinceMinor: opts.sinceMinor ?? 0,
  };
}

export const resourceTypes: readonly ResourceType[] = [
  type('', 'v1', 'namespaces', 'Namespace', false, { shortNames: ['ns'], subresources: ['status'] }),
  type('', 'v1', 'nodes', 'Node', false, { shortNames: ['no'], subresources: ['status'] }),
  type('', 'v1', 'pods', 'Pod', true, {
    shortNames: ['po'],
    subresources: ['status', 'binding', 'log', 'exec', 'attach', 'portforward'],
  }),
  type('', 'v1', 'events', 'Event', true, { shortNames: ['ev'] }),
  type('', 'v1', 'configmaps', 'ConfigMap', true, { shortNames: ['cm'] }),
  type('', 'v1', 'secrets', 'Secret', true),
  type('', 'v1', 'serviceaccounts', 'ServiceAccount', true, { shortNames: ['sa'] }),
  type('coordination.k8s.io', 'v1', 'leases', 'Lease', true),
  type('scheduling.k8s.io', 'v1', 'priorityclasses', 'PriorityClass', false, { shortNames: ['pc'] }),
  // Stored and listed only: no disruption controller fills in their status (disruptionsAllowed reads as 0).
  type('policy', 'v1', 'poddisruptionbudgets', 'PodDisruptionBudget', true, { shortNames: ['pdb'] }),
  type('apps', 'v1', 'deployments', 'Deployment', true, { shortNames: ['deploy'], subresources: ['status', 'scale'] }),
  type('apps', 'v1', 'replicasets', 'ReplicaSet', true, { shortNames: ['rs'], subresources: ['status', 'scale'] }),
  type('batch', 'v1', 'jobs', 'Job', true, { subresources: ['status'] }),
  // Listed so `kubectl top` asks, and hears what the simulator offers instead (`unavailable.ts`).
  type('metrics.k8s.io', 'v1beta1', 'pods', 'PodMetrics', true),
  type('metrics.k8s.io', 'v1beta1', 'nodes', 'NodeMetrics', false),
  type('admissionregistration.k8s.io', 'v1', 'mutatingwebhookconfigurations', 'MutatingWebhookConfiguration', false),
  type(
    'admissionregistration.k8s.io',
    'v1',
    'validatingwebhookconfigurations',
    'ValidatingWebhookConfiguration',
    false,
  ),
  // Dynamic Resource Allocation: resource.k8s.io/v1 is the only version 1.36 serves by default.
  type('resource.k8s.io', 'v1', 'deviceclasses', 'DeviceClass', false, { sinceMinor: 36 }),
  type('resource.k8s.io', 'v1', 'resourceclaims', 'ResourceClaim', true, { subresources: ['status'], sinceMinor: 36 }),
  type('resource.k8s.io', 'v1', 'resourceclaimtemplates', 'ResourceClaimTemplate', true, { sinceMinor: 36 }),
  type('resource.k8s.io', 'v1', 'resourceslices', 'ResourceSlice', false, { sinceMinor: 36 }),
];

/** The types a server playing Kubernetes 1.`minor` serves. */
export function servedTypes(minor: number): readonly ResourceType[] {
  return resourceTypes.filter((t) => t.sinceMinor <= minor);
}

export function findResourceType(
  group: string,
  version: string,
  resource: string,
  minor = EVERY_MINOR,
): ResourceType | undefined {
  return servedTypes(minor).find((t) => t.group === group && t.version === version && t.resource === resource);
}

export function apiVersionOf(t: ResourceType): string {
  return t.group ? `${t.group}/${t.version}` : t.version;
}

/** Store key prefix of a type: the same object has one key whatever version is asked. */
export function typeKey(t: Pick<ResourceType, 'group' | 'resource'>): string {
  return `${t.group}/${t.resource}`;
}

export function groupsOf(minor = EVERY_MINOR): { group: string; version: string }[] {
  const seen = new Map<string, string>();
  for (const t of servedTypes(minor)) if (t.group) seen.set(t.group, t.version);
  return [...seen].map(([group, version]) => ({ group, version }));
}

/** `/api`: the legacy core group's versions. */
export function coreVersions(serverAddress: string) {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

/** `/apis`: every named group. */
export function apiGroupList(minor = EVERY_MINOR) {
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: groupsOf(minor).map(({ group, version }) => ({
      name: group,
      versions: [{ groupVersion: `${group}/${version}`, version }],
      preferredVersion: { groupVersion: `${group}/${version}`, version },
    })),
  };
}

export function apiGroup(group: string, minor = EVERY_MINOR) {
  const g = groupsOf(minor).find((x) => x.group === group);
  if (!g) return undefined;
  const gv = { groupVersion: `${group}/${g.version}`, version: g.version };
  return { kind: 'APIGroup', apiVersion: 'v1', name: group, versions: [gv], preferredVersion: gv };
}

/** `/api/v1` or `/apis/<group>/<version>`; undefined when the group version is not served. */
export function apiResourceList(group: string, version: string, minor = EVERY_MINOR) {
  const types = servedTypes(minor).filter((t) => t.group === group && t.version === version);
  if (types.length === 0) return undefined;
  const resources: Record<string, unknown>[] = [];
  for (const t of types) {
    resources.push({
      name: t.resource,
      singularName: t.singular,
      namespaced: t.namespaced,
      kind: t.kind,
      verbs: VERBS,
      ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
    });
    for (const sub of t.subresources) {
      if (sub === 'scale') {
        resources.push({ ...SCALE, name: `${t.resource}/scale`, namespaced: t.namespaced });
        continue;
      }
      resources.push({
        name: `${t.resource}/${sub}`,
        singularName: '',
        namespaced: t.namespaced,
        kind: SUBRESOURCE_KINDS[sub] ?? t.kind,
        verbs: SUBRESOURCE_VERBS[sub] ?? ['get', 'patch', 'update'],
      });
    }
  }
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group ? `${group}/${version}` : version,
    resources,
  };
}
