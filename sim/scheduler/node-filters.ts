/**
 * kube-scheduler's own filters that run before any extender, as pure functions over plain
 * objects: nodeSelector, required node affinity, taints and tolerations, unschedulable nodes,
 * and resource fit (cpu, memory, pods, and extended resources the extender does not own).
 * Each failure is a reason string in kube-scheduler's words, so the summary reads the same.
 */
export type Taint = { key: string; value?: string; effect: string };
export type Toleration = { key?: string; operator?: string; value?: string; effect?: string };
type SelectorTerm = {
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
  matchFields?: { key: string; operator: string; values?: string[] }[];
};

export type SchedNode = {
  metadata: { name: string; labels?: Record<string, string> };
  spec?: { unschedulable?: boolean; taints?: Taint[] };
  status?: { allocatable?: Record<string, string>; conditions?: { type: string; status: string }[] };
};

type Resources = { requests?: Record<string, string | number>; limits?: Record<string, string | number> };
export type SchedPod = {
  metadata: { name: string; namespace?: string; uid?: string };
  spec?: {
    nodeName?: string;
    nodeSelector?: Record<string, string>;
    tolerations?: Toleration[];
    affinity?: {
      nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: SelectorTerm[] } };
    };
    containers?: { resources?: Resources }[];
    initContainers?: { resources?: Resources }[];
  };
  status?: { phase?: string };
};

const SUFFIX: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity as a number of base units (cores, bytes); NaN when malformed. */
export function parseQuantity(q: string | number | undefined): number {
  if (q === undefined) return 0;
  if (typeof q === 'number') return q;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?\d+)?)([a-zA-Z]*)$/.exec(q.trim());
  if (!m || !(m[2]! in SUFFIX)) return Number.NaN;
  return Number(m[1]) * SUFFIX[m[2]!]!;
}

/** A pod's effective request per resource: max(sum of containers, largest init container). */
export function podRequests(pod: SchedPod): Map<string, number> {
  const sum = new Map<string, number>();
  for (const c of pod.spec?.containers ?? []) {
    const req = { ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) };
    for (const [k, v] of Object.entries(req)) sum.set(k, (sum.get(k) ?? 0) + parseQuantity(v));
  }
  for (const c of pod.spec?.initContainers ?? []) {
    const req = { ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) };
    for (const [k, v] of Object.entries(req)) sum.set(k, Math.max(sum.get(k) ?? 0, parseQuantity(v)));
  }
  return sum;
}

function matchExpression(value: string | undefined, op: string, values: string[] = []): boolean {
  switch (op) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
      return value !== undefined && Number(value) > Number(values[0]);
    case 'Lt':
      return value !== undefined && Number(value) < Number(values[0]);
    default:
      return false;
  }
}

function matchesAffinity(pod: SchedPod, node: SchedNode): boolean {
  const terms = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (!terms || terms.length === 0) return true;
  const labels = node.metadata.labels ?? {};
  // Terms are ORed; expressions inside a term are ANDed.
  return terms.some(
    (t) =>
      (t.matchExpressions ?? []).every((e) => matchExpression(labels[e.key], e.operator, e.values)) &&
      (t.matchFields ?? []).every((e) =>
        matchExpression(e.key === 'metadata.name' ? node.metadata.name : undefined, e.operator, e.values),
      ),
  );
}

export function tolerates(tolerations: Toleration[], taint: Taint): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (!t.key) return t.operator === 'Exists';
    if (t.key !== taint.key) return false;
    return t.operator === 'Exists' || (t.value ?? '') === (taint.value ?? '');
  });
}

export type FilterContext = {
  /** Resources summed over the pods already on each node. */
  usedOnNode: (node: string) => Map<string, number>;
  /** Resources kube-scheduler leaves to the extender (`managedResources[].ignoredByScheduler`). */
  ignoredResources: ReadonlySet<string>;
};

/** Why the node cannot take the pod, in kube-scheduler's words; undefined when it fits. */
export function filterNode(pod: SchedPod, node: SchedNode, ctx: FilterContext): string | undefined {
  if (node.spec?.unschedulable) return 'node(s) were unschedulable';
  const labels = node.metadata.labels ?? {};
  for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {})) {
    if (labels[k] !== v) return "node(s) didn't match Pod's node affinity/selector";
  }
  if (!matchesAffinity(pod, node)) return "node(s) didn't match Pod's node affinity/selector";
  const tolerations = pod.spec?.tolerations ?? [];
  for (const taint of node.spec?.taints ?? []) {
    if (taint.effect === 'PreferNoSchedule') continue;
    if (!tolerates(tolerations, taint)) {
      return `node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`;
    }
  }
  const alloc = node.status?.allocatable ?? {};
  const used = ctx.usedOnNode(node.metadata.name);
  if ((used.get('pods') ?? 0) + 1 > parseQuantity(alloc['pods'] ?? '110')) return 'Too many pods';
  for (const [res, want] of podRequests(pod)) {
    if (want <= 0 || ctx.ignoredResources.has(res)) continue;
    const cap = parseQuantity(alloc[res]);
    if (!(cap >= (used.get(res) ?? 0) + want)) return `Insufficient ${res}`;
  }
  return undefined;
}

/** kube-scheduler's FailedScheduling sentence: `0/4 nodes are available: 2 Insufficient cpu, ...`. */
export function summarizeFailures(total: number, reasons: ReadonlyMap<string, string>): string {
  const counts = new Map<string, number>();
  for (const r of reasons.values()) counts.set(r, (counts.get(r) ?? 0) + 1);
  const parts = [...counts].sort((a, b) => a[0].localeCompare(b[0])).map(([r, n]) => `${n} ${r}`);
  return `0/${total} nodes are available${parts.length ? `: ${parts.join(', ')}` : ''}.`;
}
