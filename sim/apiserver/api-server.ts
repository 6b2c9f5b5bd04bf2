/**
 * The simulated Kubernetes API server over HTTP: discovery, CRUD, watch, patch, binding and
 * admission, on a loopback port. Real clients (kubectl, @kubernetes/client-node) talk to it
 * unchanged; `close()` ends every open watch so nothing outlives it.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseYaml } from 'yaml';
import type { AdmissionSources } from './admission.js';
import {
  ApiError,
  badRequest,
  internal,
  methodNotAllowed,
  notFound,
  successStatus,
  unsupportedMediaType,
} from './api-status.js';
import { readDeleteOptions } from './delete-options.js';
import { ObjectStore } from './object-store.js';
import { openApiV3Document, openApiV3Index } from './openapi-document.js';
import { patchTypeOf } from './patch.js';
import { decodeProtobufBody, PROTOBUF_CONTENT_TYPE, UnsupportedProtobuf } from './protobuf-body.js';
import { parseRoute } from './request-route.js';
import { ResourceHandlers, type UserInfo } from './resource-handlers.js';
import { apiGroup, apiGroupList, apiResourceList, coreVersions, type ResourceType } from './resource-registry.js';
import { type KubeObject, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { toTable, wantsTable } from './table-view.js';
import { serveWatch } from './watch-stream.js';

export type ApiServerOptions = {
  host?: string;
  port?: number;
  now?: () => Date;
  /** Maps a webhook's `clientConfig.service` to a URL (the sim has no Service network). */
  resolveService?: AdmissionSources['resolveService'];
  onAdmissionCall?: AdmissionSources['onCall'];
  /** `pods/{name}/log`: what the kubelet would stream (the sim reads its container log files). */
  podLog?: (pod: KubeObject, container: string | undefined) => string | undefined;
  bookmarkIntervalMs?: number;
  /** Namespaces that exist from the start besides default, kube-system, kube-public, kube-node-lease. */
  namespaces?: string[];
  /**
   * Bearer tokens and the users they stand for (webhooks see them in `userInfo`, as they would see
   * service accounts). A request without a known token is the cluster admin.
   */
  tokens?: Record<string, UserInfo>;
};

const TOKEN_REVIEWS = '/apis/authentication.k8s.io/v1/tokenreviews';

/** TokenReview (authentication.k8s.io/v1): a known token is its user, any other is refused. */
function reviewToken(review: KubeObject, tokens: Record<string, UserInfo>): KubeObject {
  const token = (review['spec'] as { token?: unknown } | undefined)?.token;
  const user = typeof token === 'string' ? tokens[token] : undefined;
  return {
    ...review,
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenReview',
    metadata: { ...(review.metadata ?? {}) },
    status: user
      ? {
          authenticated: true,
          user: { username: user.username, groups: user.groups ?? [], ...(user.extra ? { extra: user.extra } : {}) },
        }
      : { authenticated: false, error: 'invalid bearer token' },
  };
}

export type SimApiServer = {
  readonly url: string;
  readonly store: ObjectStore;
  readonly handlers: ResourceHandlers;
  close(): Promise<void>;
};

const ADMIN: UserInfo = { username: 'sim-admin', groups: ['system:masters', 'system:authenticated'] };

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  const ct = req.headers['content-type'] ?? '';
  if (ct.startsWith(PROTOBUF_CONTENT_TYPE)) {
    try {
      return decodeProtobufBody(raw);
    } catch (e) {
      if (e instanceof UnsupportedProtobuf) throw unsupportedMediaType(`${ct} (${e.message})`);
      throw badRequest(`the body of the request could not be decoded: ${(e as Error).message}`);
    }
  }
  const text = raw.toString('utf8');
  if (!text.trim()) return undefined;
  try {
    return ct.includes('yaml') ? parseYaml(text) : JSON.parse(text);
  } catch (e) {
    throw badRequest(`the body of the request could not be decoded: ${(e as Error).message}`);
  }
}

/**
 * A `Warning` header as kube-apiserver writes it (RFC 7234 warn-code 299, agent "-", the text
 * quoted with `\` and `"` escaped); kubectl prints each as `Warning: <text>`.
 */
export function warningHeader(text: string): string {
  const clean = text.replace(/\p{Cc}/gu, ' ').replace(/[\\"]/g, (c) => `\\${c}`);
  // Header values are bytes: UTF-8 on the wire, as Go writes them (Node sends latin1 code units).
  return `299 - "${Buffer.from(clean, 'utf8').toString('latin1')}"`;
}

function addWarning(res: ServerResponse, text: string): void {
  const prior = res.getHeader('warning');
  const list = prior === undefined ? [] : Array.isArray(prior) ? prior : [String(prior)];
  res.setHeader('warning', [...list, warningHeader(text)]);
}

function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
  res.end(payload);
}

function discovery(path: string, serverAddress: string): unknown {
  const clean = path.replace(/\/+$/, '') || '/';
  if (clean === '/api') return coreVersions(serverAddress);
  if (clean === '/apis') return apiGroupList();
  if (clean === '/version') {
    return {
      major: '1',
      minor: '26',
      gitVersion: 'v1.26.5-vcuda-sim',
      platform: 'linux/amd64',
      goVersion: 'go1.20',
      compiler: 'gc',
    };
  }
  if (clean === '/healthz' || clean === '/livez' || clean === '/readyz') return 'ok';
  if (clean === '/openapi/v3') return openApiV3Index();
  if (clean.startsWith('/openapi/v3/')) return openApiV3Document(clean.slice('/openapi/v3/'.length));
  const parts = clean.split('/').filter(Boolean);
  if (parts[0] === 'api' && parts.length === 2) return apiResourceList('', parts[1]!);
  if (parts[0] === 'apis' && parts.length === 2) return apiGroup(parts[1]!);
  if (parts[0] === 'apis' && parts.length === 3) return apiResourceList(parts[1]!, parts[2]!);
  return undefined;
}

export async function startApiServer(opts: ApiServerOptions = {}): Promise<SimApiServer> {
  const now = opts.now ?? (() => new Date());
  const store = new ObjectStore();
  const admission: AdmissionSources = {
    mutating: () => store.list('admissionregistration.k8s.io/mutatingwebhookconfigurations') as never,
    validating: () => store.list('admissionregistration.k8s.io/validatingwebhookconfigurations') as never,
    namespaceLabels: (ns) => store.get('/namespaces', undefined, ns)?.metadata.labels ?? {},
    ...(opts.resolveService ? { resolveService: opts.resolveService } : {}),
    ...(opts.onAdmissionCall ? { onCall: opts.onAdmissionCall } : {}),
  };
  const handlers = new ResourceHandlers(store, admission, now);
  const nsType = parseRoute('/api/v1/namespaces') as { type: ResourceType };
  for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease', ...(opts.namespaces ?? [])]) {
    if (!store.get('/namespaces', undefined, name)) {
      await handlers.create(nsType.type, undefined, { metadata: { name } }, { dryRun: false, user: ADMIN });
    }
  }
  const closers = new Set<() => void>();
  let serverAddress = '127.0.0.1:0';

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://sim');
    const q = url.searchParams;
    if (req.method === 'POST' && url.pathname === TOKEN_REVIEWS) {
      return sendJson(res, 201, reviewToken((await readBody(req)) as KubeObject, opts.tokens ?? {}));
    }
    const route = parseRoute(url.pathname);
    if (route.kind === 'discovery') {
      const doc = discovery(url.pathname, serverAddress);
      if (doc === undefined) throw notFound('', '', url.pathname);
      if (typeof doc === 'string') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(doc);
        return;
      }
      return sendJson(res, 200, doc);
    }
    if (route.kind === 'unknown') throw notFound('', '', url.pathname);
    const { type, namespace, name, subresource } = route;
    const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const user = (bearer && opts.tokens?.[bearer]) || ADMIN;
    const write = { dryRun: q.get('dryRun') === 'All', user, warn: (text: string) => addWarning(res, text) };
    const table = wantsTable(req.headers.accept);
    const method = req.method ?? 'GET';
    if (method === 'GET') {
      if (name && subresource === 'log' && namespace) {
        const pod = handlers.get(type, namespace, name);
        const text = opts.podLog?.(pod, q.get('container') ?? undefined);
        if (text === undefined) throw badRequest(`container logs of pod "${name}" are not available`);
        const tail = Number(q.get('tailLines') ?? 0);
        const body =
          tail > 0
            ? text
                .split('\n')
                .slice(-tail - 1)
                .join('\n')
            : text;
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end(body);
        return;
      }
      if (name) {
        const obj = handlers.get(type, namespace, name);
        return sendJson(
          res,
          200,
          table ? toTable(type.resource, [obj], obj.metadata.resourceVersion as string, now()) : obj,
        );
      }
      const fieldMatch = parseFieldSelector(q.get('fieldSelector'));
      const labelMatch = parseLabelSelector(q.get('labelSelector'));
      const match = (o: KubeObject) => fieldMatch(o) && labelMatch(o);
      if (q.get('watch') === '1' || q.get('watch') === 'true') {
        const timeout = Number(q.get('timeoutSeconds') ?? 0);
        serveWatch(
          store,
          {
            type,
            ...(namespace !== undefined ? { namespace } : {}),
            match,
            ...(q.get('resourceVersion') !== null ? { resourceVersion: q.get('resourceVersion')! } : {}),
            timeoutSeconds: timeout,
            allowBookmarks: q.get('allowWatchBookmarks') === 'true',
            bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 10_000,
            ...(table
              ? { render: (o: KubeObject) => toTable(type.resource, [o], o.metadata.resourceVersion as string, now()) }
              : {}),
          },
          res,
          (finish) => {
            closers.add(finish);
            res.on('close', () => closers.delete(finish));
          },
        );
        return;
      }
      const list = handlers.list(type, namespace, match);
      return sendJson(
        res,
        200,
        table ? toTable(type.resource, list.items, list.metadata.resourceVersion, now()) : list,
      );
    }
    if (method === 'POST') {
      const body = (await readBody(req)) as KubeObject;
      if (subresource === 'binding' && name && namespace) {
        handlers.bind(type, namespace, name, body, write);
        return sendJson(res, 201, successStatus(undefined));
      }
      if (name) throw methodNotAllowed(`POST is not supported on ${url.pathname}`);
      return sendJson(res, 201, await handlers.create(type, namespace, body, write));
    }
    if (method === 'PUT' && name) {
      const body = (await readBody(req)) as KubeObject;
      return sendJson(res, 200, await handlers.update(type, namespace, name, body, subresource, write));
    }
    if (method === 'PATCH' && name) {
      const patchType = patchTypeOf(req.headers['content-type']);
      const body = await readBody(req);
      return sendJson(res, 200, await handlers.patch(type, namespace, name, subresource, patchType, body, write));
    }
    if (method === 'DELETE') {
      const del = readDeleteOptions(q, await readBody(req), user);
      if (name) return sendJson(res, 200, await handlers.delete(type, namespace, name, del));
      const match = parseLabelSelector(q.get('labelSelector'));
      const fieldMatch = parseFieldSelector(q.get('fieldSelector'));
      const list = handlers.list(type, namespace, (o) => match(o) && fieldMatch(o));
      for (const o of list.items)
        await handlers.delete(type, o.metadata.namespace, o.metadata.name, del).catch(() => undefined);
      return sendJson(res, 200, list);
    }
    throw methodNotAllowed(`${method} is not supported on ${url.pathname}`);
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      const err = e instanceof ApiError ? e : internal((e as Error).message ?? String(e));
      if (res.headersSent) {
        res.end();
        return;
      }
      sendJson(res, err.status.code, err.status);
    });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve));
  const addr = server.address() as AddressInfo;
  serverAddress = `${addr.address}:${addr.port}`;
  return {
    url: `http://${addr.address}:${addr.port}`,
    store,
    handlers,
    close: async () => {
      for (const finish of [...closers]) finish();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
