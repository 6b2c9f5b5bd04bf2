/**
 * kube-scheduler's HTTP extender calls, with the exact JSON it sends (PascalCase keys, `Nodes`
 * or `NodeNames` depending on nodeCacheCapable) and its rules for reading the answers.
 */
import { readFileSync } from 'node:fs';
import { type ExtenderAnswer, ExtenderTransport, type TlsMaterial } from './extender-transport.js';
import type { SchedNode, SchedPod } from './node-filters.js';
import type { ExtenderConfig } from './scheduler-config.js';

export type FilterOutcome = {
  nodeNames: string[];
  failed: Map<string, string>;
  /** Failed nodes preemption cannot help (FailedAndUnresolvableNodes). */
  unresolvable: Set<string>;
};

/** `*Data` (base64) wins over `*File`, as in client-go; files are read per call, so a renewed certificate is used. */
function material(data: string, file: string): Buffer | undefined {
  if (data) return Buffer.from(data, 'base64');
  return file ? readFileSync(file) : undefined;
}

/**
 * kube-scheduler's extender TLS: the client certificate and CA of `tlsConfig`; with `enableHTTPS`
 * and no CA it skips verifying the server, as kube-scheduler does.
 */
function tlsMaterial(ext: ExtenderConfig): TlsMaterial {
  const t = ext.tlsConfig;
  const ca = t && material(t.caData, t.caFile);
  const cert = t && material(t.certData, t.certFile);
  const key = t && material(t.keyData, t.keyFile);
  return {
    rejectUnauthorized: Boolean(ca) && !t?.insecure,
    ...(ca ? { ca } : {}),
    ...(cert && key ? { cert, key } : {}),
    ...(t?.serverName ? { servername: t.serverName } : {}),
  };
}

/** One POST over `transport` (see `extender-transport.ts`), or on a fresh connection without one. */
async function postJson(
  ext: ExtenderConfig,
  verb: string,
  body: unknown,
  transport?: ExtenderTransport,
): Promise<unknown> {
  const url = new URL(`${ext.urlPrefix.replace(/\/$/, '')}/${verb}`);
  const call = {
    url,
    ...(url.protocol === 'https:' ? { tls: tlsMaterial(ext) } : {}),
    payload: Buffer.from(JSON.stringify(body)),
    timeoutMs: ext.httpTimeoutMs,
    verb,
  };
  const oneShot = transport ? undefined : new ExtenderTransport({ keepAlive: false });
  let answer: ExtenderAnswer;
  try {
    answer = await (transport ?? (oneShot as ExtenderTransport)).post(call);
  } finally {
    oneShot?.close();
  }
  if (answer.status !== 200) throw new Error(`extender ${verb}: HTTP ${answer.status}: ${answer.text.slice(0, 300)}`);
  try {
    return JSON.parse(answer.text);
  } catch {
    throw new Error(`extender ${verb}: response is not JSON`);
  }
}

/** True when kube-scheduler would send this pod to the extender (`managedResources`). */
export function isInterested(ext: ExtenderConfig, pod: SchedPod): boolean {
  if (ext.managedResources.length === 0) return true;
  const names = new Set(ext.managedResources.map((r) => r.name));
  const containers = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])];
  return containers.some((c) =>
    [...Object.keys(c.resources?.requests ?? {}), ...Object.keys(c.resources?.limits ?? {})].some((k) => names.has(k)),
  );
}

function args(ext: ExtenderConfig, pod: SchedPod, nodes: SchedNode[]) {
  return ext.nodeCacheCapable
    ? { Pod: pod, Nodes: null, NodeNames: nodes.map((n) => n.metadata.name) }
    : { Pod: pod, Nodes: { metadata: {}, items: nodes }, NodeNames: null };
}

type FilterResult = {
  Nodes?: { items?: SchedNode[] } | null;
  NodeNames?: string[] | null;
  FailedNodes?: Record<string, string> | null;
  FailedAndUnresolvableNodes?: Record<string, string> | null;
  Error?: string;
};

export async function callFilter(
  ext: ExtenderConfig,
  pod: SchedPod,
  nodes: SchedNode[],
  transport?: ExtenderTransport,
): Promise<FilterOutcome> {
  const r = (await postJson(ext, ext.filterVerb, args(ext, pod, nodes), transport)) as FilterResult;
  if (r.Error) throw new Error(r.Error);
  const input = new Set(nodes.map((n) => n.metadata.name));
  const names = ext.nodeCacheCapable && r.NodeNames ? r.NodeNames : (r.Nodes?.items ?? []).map((n) => n.metadata.name);
  for (const n of names) if (!input.has(n)) throw new Error(`extender returned node "${n}" that was not in the input`);
  const failed = new Map<string, string>(Object.entries(r.FailedNodes ?? {}));
  const unresolvable = new Set<string>();
  for (const [n, why] of Object.entries(r.FailedAndUnresolvableNodes ?? {})) {
    failed.set(n, why);
    unresolvable.add(n);
  }
  return { nodeNames: names, failed, unresolvable };
}

/** Scores 0..10 per host; errors are ignored by kube-scheduler, so they give an empty map here. */
export async function callPrioritize(
  ext: ExtenderConfig,
  pod: SchedPod,
  nodes: SchedNode[],
  transport?: ExtenderTransport,
): Promise<Map<string, number>> {
  try {
    const r = (await postJson(ext, ext.prioritizeVerb, args(ext, pod, nodes), transport)) as
      | { Host: string; Score: number }[]
      | null;
    return new Map((r ?? []).map((h) => [h.Host, h.Score]));
  } catch {
    return new Map();
  }
}

export async function callBind(
  ext: ExtenderConfig,
  pod: SchedPod,
  node: string,
  transport?: ExtenderTransport,
): Promise<void> {
  const binding = {
    PodName: pod.metadata.name,
    PodNamespace: pod.metadata.namespace ?? 'default',
    PodUID: pod.metadata.uid ?? '',
    Node: node,
  };
  const r = (await postJson(ext, ext.bindVerb, binding, transport)) as { Error?: string };
  if (r.Error) throw new Error(r.Error);
}

/** kube-scheduler's MetaVictims / Victims per node, as the preempt verb takes and answers them. */
export type NodeVictims = Map<string, { pods: SchedPod[]; numPdbViolations: number }>;

/**
 * The preempt verb (ProcessPreemption): the victims per node sent in the form nodeCacheCapable
 * picks, the answer (always UIDs) turned back into pods of that node; a node answered without
 * victims, or with a pod not on it, is an error, as kube-scheduler reads it.
 */
export async function callPreempt(
  ext: ExtenderConfig,
  pod: SchedPod,
  victims: NodeVictims,
  podsOn: (node: string) => SchedPod[],
  transport?: ExtenderTransport,
): Promise<NodeVictims> {
  const entries = [...victims];
  const body = ext.nodeCacheCapable
    ? {
        Pod: pod,
        NodeNameToVictims: null,
        NodeNameToMetaVictims: Object.fromEntries(
          entries.map(([n, v]) => [
            n,
            { Pods: v.pods.map((p) => ({ UID: p.metadata.uid ?? '' })), NumPDBViolations: v.numPdbViolations },
          ]),
        ),
      }
    : {
        Pod: pod,
        NodeNameToVictims: Object.fromEntries(
          entries.map(([n, v]) => [n, { Pods: v.pods, NumPDBViolations: v.numPdbViolations }]),
        ),
        NodeNameToMetaVictims: null,
      };
  const r = (await postJson(ext, ext.preemptVerb, body, transport)) as {
    NodeNameToMetaVictims?: Record<string, { Pods?: { UID: string }[] | null; NumPDBViolations?: number }> | null;
  };
  const out: NodeVictims = new Map();
  for (const [node, v] of Object.entries(r.NodeNameToMetaVictims ?? {})) {
    const uids = (v.Pods ?? []).map((p) => p.UID);
    if (uids.length === 0) throw new Error(`expected at least one victim pod on node "${node}"`);
    const here = new Map(podsOn(node).map((p) => [p.metadata.uid ?? '', p]));
    const pods = uids.map((uid) => {
      const p = here.get(uid);
      if (!p) throw new Error(`extender preempt: pod ${uid} is not on node "${node}"`);
      return p;
    });
    out.set(node, { pods, numPdbViolations: v.NumPDBViolations ?? 0 });
  }
  return out;
}
