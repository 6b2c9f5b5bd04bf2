/**
 * A tiny in-process Kubernetes API server for tests: exactly the endpoints the control plane calls
 * (list + watch Nodes and Pods, read/patch Pods, pods/binding, Events, Secrets, ConfigMaps), on an
 * ephemeral loopback port. It is the client boundary, so the real @kubernetes/client-node code runs.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

type Obj = {
  metadata: {
    name: string;
    namespace?: string;
    resourceVersion?: string;
    uid?: string;
    annotations?: Record<string, string>;
  };
  [k: string]: unknown;
};

function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

export type FakeKubeApi = {
  url: string;
  kubeConfig: KubeConfig;
  nodes: Map<string, Obj>;
  pods: Map<string, Obj>;
  events: Obj[];
  secrets: Map<string, Obj>;
  configMaps: Map<string, Obj>;
  /** Count of calls per "METHOD path-kind", e.g. "POST binding". */
  calls: Map<string, number>;
  /** Makes the next N calls of a kind fail with this status. */
  failNext(kind: string, status: number, times?: number): void;
  putNode(node: object): void;
  putPod(pod: object): void;
  deletePod(namespace: string, name: string): void;
  close(): Promise<void>;
};

export async function startFakeKubeApi(): Promise<FakeKubeApi> {
  let rv = 1;
  const nodes = new Map<string, Obj>();
  const pods = new Map<string, Obj>();
  const secrets = new Map<string, Obj>();
  const configMaps = new Map<string, Obj>();
  const events: Obj[] = [];
  const calls = new Map<string, number>();
  const failures = new Map<string, { status: number; times: number }>();
  const watchers = {
    nodes: new Set<ServerResponse>(),
    pods: new Set<ServerResponse>(),
    events: new Set<ServerResponse>(),
  };

  const notify = (kind: keyof typeof watchers, type: string, obj: Obj) => {
    for (const res of watchers[kind]) res.write(`${JSON.stringify({ type, object: obj })}\n`);
  };
  const stamp = (obj: Obj): Obj => {
    obj.metadata.resourceVersion = String(++rv);
    return obj;
  };
  const podKey = (ns: string, name: string) => `${ns}/${name}`;

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const status = (res: ServerResponse, code: number, message: string) =>
    send(res, code, { kind: 'Status', apiVersion: 'v1', status: 'Failure', message, code });
  const readBody = async (req: IncomingMessage): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? JSON.parse(text) : undefined;
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const parts = url.pathname.split('/').filter(Boolean); // api v1 ...
    const method = req.method ?? 'GET';
    const kind = parts[2] === 'namespaces' ? (parts[6] ?? parts[4] ?? '') : (parts[2] ?? '');
    const callKind = `${method} ${kind}`;
    calls.set(callKind, (calls.get(callKind) ?? 0) + 1);
    const fail = failures.get(callKind);
    if (fail && fail.times > 0) {
      fail.times -= 1;
      return status(res, fail.status, `injected failure for ${callKind}`);
    }
    try {
      // Cluster-wide lists and watches.
      // (Events: every one, whatever the field selector; the consumers filter by reason anyway.)
      if (
        parts.length === 3 &&
        (parts[2] === 'nodes' || parts[2] === 'pods' || parts[2] === 'events') &&
        method === 'GET'
      ) {
        const which = parts[2] as keyof typeof watchers;
        const store = which === 'nodes' ? nodes : which === 'pods' ? pods : new Map(events.map((e, i) => [i, e]));
        if (url.searchParams.get('watch') === 'true') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.flushHeaders();
          watchers[which].add(res);
          req.on('close', () => watchers[which].delete(res));
          return;
        }
        return send(res, 200, {
          kind: which === 'nodes' ? 'NodeList' : which === 'pods' ? 'PodList' : 'EventList',
          apiVersion: 'v1',
          metadata: { resourceVersion: String(rv) },
          items: [...store.values()],
        });
      }
      if (parts[2] !== 'namespaces' || !parts[3]) return status(res, 404, `no route ${url.pathname}`);
      const ns = parts[3];
      const resource = parts[4];
      const name = parts[5];
      if (resource === 'pods' && name) {
        const key = podKey(ns, name);
        const pod = pods.get(key);
        if (!pod) return status(res, 404, `pods "${name}" not found`);
        if (parts[6] === 'binding' && method === 'POST') {
          const body = (await readBody(req)) as {
            target: { name: string };
            metadata?: { uid?: string; annotations?: Record<string, string> };
          };
          const spec = (pod.spec ?? {}) as { nodeName?: string };
          if (body.metadata?.uid && body.metadata.uid !== pod.metadata.uid) return status(res, 409, 'uid mismatch');
          if (spec.nodeName) return status(res, 409, `pod ${name} is already assigned to node "${spec.nodeName}"`);
          // kube-apiserver merges the Binding's annotations into the pod in the same write.
          const annotations = { ...(pod.metadata.annotations ?? {}), ...(body.metadata?.annotations ?? {}) };
          const next = stamp({
            ...pod,
            metadata: { ...pod.metadata, annotations },
            spec: { ...spec, nodeName: body.target.name },
          });
          pods.set(key, next);
          notify('pods', 'MODIFIED', next);
          return send(res, 201, { kind: 'Status', status: 'Success' });
        }
        if (method === 'GET') return send(res, 200, pod);
        if (method === 'PATCH') {
          const next = stamp(mergePatch(pod, await readBody(req)) as Obj);
          pods.set(key, next);
          notify('pods', 'MODIFIED', next);
          return send(res, 200, next);
        }
      }
      if (resource === 'events' && method === 'POST') {
        const ev = stamp((await readBody(req)) as Obj);
        events.push(ev);
        notify('events', 'ADDED', ev);
        return send(res, 201, ev);
      }
      if (resource === 'events' && method === 'PATCH' && name) {
        const at = events.findIndex((e) => e.metadata.namespace === ns && e.metadata.name === name);
        if (at === -1) return status(res, 404, `events "${name}" not found`);
        const next = stamp(mergePatch(events[at] as Obj, await readBody(req)) as Obj);
        events[at] = next;
        notify('events', 'MODIFIED', next);
        return send(res, 200, next);
      }
      if (resource === 'secrets') {
        if (method === 'GET' && name) {
          const s = secrets.get(podKey(ns, name));
          return s ? send(res, 200, s) : status(res, 404, `secrets "${name}" not found`);
        }
        if (method === 'POST' || method === 'PUT') {
          const body = (await readBody(req)) as Obj & {
            data?: Record<string, string>;
            stringData?: Record<string, string>;
            type?: string;
          };
          const key = podKey(ns, body.metadata.name);
          const stored = secrets.get(key);
          if (method === 'POST' && stored) return status(res, 409, `secrets "${body.metadata.name}" already exists`);
          if (method === 'PUT' && !stored) return status(res, 404, `secrets "${name}" not found`);
          if (method === 'PUT' && body.metadata.resourceVersion !== stored?.metadata.resourceVersion) {
            return status(res, 409, `the object has been modified; please apply your changes to the latest version`);
          }
          const data = {
            ...(body.data ?? {}),
            ...Object.fromEntries(
              Object.entries(body.stringData ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
            ),
          };
          const s = stamp({ apiVersion: 'v1', kind: 'Secret', type: body.type, metadata: body.metadata, data });
          secrets.set(key, s);
          return send(res, method === 'POST' ? 201 : 200, s);
        }
      }
      if (resource === 'configmaps') {
        const body = (await readBody(req)) as Obj;
        const key = podKey(ns, body.metadata.name);
        if (method === 'PUT') {
          if (!configMaps.has(key)) return status(res, 404, `configmaps "${name}" not found`);
          configMaps.set(key, stamp(body));
          return send(res, 200, body);
        }
        if (method === 'POST') {
          if (configMaps.has(key)) return status(res, 409, 'exists');
          configMaps.set(key, stamp(body));
          return send(res, 201, body);
        }
      }
      return status(res, 404, `no route ${method} ${url.pathname}`);
    } catch (err) {
      return status(res, 500, (err as Error).message);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
    users: [{ name: 'fake' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
    currentContext: 'fake',
  });
  return {
    url,
    kubeConfig,
    nodes,
    pods,
    events,
    secrets,
    configMaps,
    calls,
    failNext(kind, code, times = 1) {
      failures.set(kind, { status: code, times });
    },
    putNode(node) {
      const n = stamp(structuredClone(node) as Obj);
      const existed = nodes.has(n.metadata.name);
      nodes.set(n.metadata.name, n);
      notify('nodes', existed ? 'MODIFIED' : 'ADDED', n);
    },
    putPod(pod) {
      const p = stamp(structuredClone(pod) as Obj);
      const key = podKey(p.metadata.namespace ?? 'default', p.metadata.name);
      const existed = pods.has(key);
      pods.set(key, p);
      notify('pods', existed ? 'MODIFIED' : 'ADDED', p);
    },
    deletePod(namespace, name) {
      const key = podKey(namespace, name);
      const p = pods.get(key);
      if (!p) return;
      pods.delete(key);
      notify('pods', 'DELETED', stamp(p));
    },
    async close() {
      for (const set of Object.values(watchers)) for (const r of set) r.end();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
