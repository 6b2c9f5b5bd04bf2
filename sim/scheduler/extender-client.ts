/**
 * kube-scheduler's HTTP extender calls, with the exact JSON it sends (PascalCase keys, `Nodes`
 * or `NodeNames` depending on nodeCacheCapable) and its rules for reading the answers.
 */

import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { SchedNode, SchedPod } from './node-filters.js';
import type { ExtenderConfig } from './scheduler-config.js';

export type FilterOutcome = { nodeNames: string[]; failed: Map<string, string> };

/** `*Data` (base64) wins over `*File`, as in client-go; files are read per connection, so a renewed certificate is used. */
function material(data: string, file: string): Buffer | undefined {
  if (data) return Buffer.from(data, 'base64');
  return file ? readFileSync(file) : undefined;
}

/**
 * kube-scheduler's extender transport: the client certificate and CA of `tlsConfig`; with
 * `enableHTTPS` and no CA it skips verifying the server, as kube-scheduler does.
 */
function tlsOptions(ext: ExtenderConfig): https.RequestOptions {
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

/**
 * kube-scheduler's extender transport (a Go `http.Transport`): connections are kept alive and
 * reused, at most 2 idle per host (Go's `DefaultMaxIdleConnsPerHost`), and calls that overlap (the
 * binds in flight) open more. Behind the sim's Service proxy, which balances connections as
 * kube-proxy does, a pod's verbs may still reach different replicas. The TLS options are part of
 * the pool's key, so a renewed client certificate is used on new connections.
 */
export class ExtenderTransport {
  private readonly plain: http.Agent;
  private readonly secure: https.Agent;

  /** `keepAlive: false` is Go's `DisableKeepAlives`: a fresh connection per call. */
  constructor(opts: { keepAlive: boolean } = { keepAlive: true }) {
    this.plain = new http.Agent({ keepAlive: opts.keepAlive, maxFreeSockets: 2 });
    this.secure = new https.Agent({ keepAlive: opts.keepAlive, maxFreeSockets: 2 });
  }

  agentFor(url: URL): http.Agent {
    return url.protocol === 'https:' ? this.secure : this.plain;
  }

  close(): void {
    this.plain.destroy();
    this.secure.destroy();
  }
}

/** One POST, over `transport`'s kept-alive connections, or on a fresh connection without one. */
function postJson(ext: ExtenderConfig, verb: string, body: unknown, transport?: ExtenderTransport): Promise<unknown> {
  const url = new URL(`${ext.urlPrefix.replace(/\/$/, '')}/${verb}`);
  const payload = Buffer.from(JSON.stringify(body));
  const lib = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(
      url,
      {
        method: 'POST',
        agent: transport?.agentFor(url) ?? false,
        timeout: ext.httpTimeoutMs,
        headers: { 'content-type': 'application/json', 'content-length': payload.length },
        ...(url.protocol === 'https:' ? tlsOptions(ext) : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200)
            return reject(new Error(`extender ${verb}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
          try {
            resolve(JSON.parse(text));
          } catch {
            reject(new Error(`extender ${verb}: response is not JSON`));
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`extender ${verb}: no answer within ${ext.httpTimeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
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
  for (const [n, why] of Object.entries(r.FailedAndUnresolvableNodes ?? {})) failed.set(n, why);
  return { nodeNames: names, failed };
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
