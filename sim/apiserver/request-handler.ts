/**
 * One HTTP request to the simulated API server: token reviews, discovery, then the resource verbs
 * (GET with logs, watches and tables; POST with bindings; PUT; PATCH; DELETE of one object or a
 * collection), each answered as kube-apiserver answers it. Every error leaves as a Status.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import {
  ApiError,
  badRequest,
  internal,
  methodNotAllowed,
  notFound,
  successStatus,
  unauthorized,
} from './api-status.js';
import { readDeleteOptions } from './delete-options.js';
import { discoveryDocument, minorOf, type ServedVersion } from './discovery.js';
import { addWarning, readBody, sendJson, sendJsonBytes, sendText } from './http-exchange.js';
import type { ObjectStore } from './object-store.js';
import { patchTypeOf } from './patch.js';
import { parseRoute, type Route } from './request-route.js';
import type { ResourceHandlers, UserInfo, WriteOptions } from './resource-handlers.js';
import { toScale } from './scale-subresource.js';
import { type KubeObject, type Matcher, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { includeObjectOf, toTable, wantsTable } from './table-view.js';
import { unavailable, unavailableFeatureOf } from './unavailable.js';
import { type SharedEventLines, serveWatch } from './watch-stream.js';

/** What `pods/{name}/log` shows of a container; undefined: its logs are not available. */
export type PodLogReader = (pod: KubeObject, container: string | undefined) => string | undefined;

/** What every request reads besides itself: the server's state and settings. */
export type ServerContext = {
  store: ObjectStore;
  /** The encoded lines of the change the watches are being sent. */
  watchLines: SharedEventLines;
  handlers: ResourceHandlers;
  now: () => Date;
  tokens?: Record<string, UserInfo>;
  /**
   * true: a request needs a known bearer token, as kube-apiserver with anonymous auth limited to
   * system:public-info-viewer; false: a request without one is the cluster admin (in-process tests).
   */
  requireCredentials: boolean;
  podLog?: PodLogReader;
  bookmarkIntervalMs: number;
  /** host:port the server listens on, named in the discovery documents. */
  serverAddress: () => string;
  /** The finishers of the open watches, so closing the server can end them. */
  watches: Set<() => void>;
  /** The Kubernetes version `/version` reports. */
  version: ServedVersion;
  /** Named where kubectl asks for what the simulator has not (exec, port-forward, top). */
  dashboardUrl?: string;
};

/** The caller of a request without a bearer token, where credentials are not required. */
export const ADMIN: UserInfo = { username: 'sim-admin', groups: ['system:masters', 'system:authenticated'] };

const TOKEN_REVIEWS = '/apis/authentication.k8s.io/v1/tokenreviews';

/** What kube-apiserver's default RBAC (system:public-info-viewer) lets anonymous callers read. */
const PUBLIC_INFO_PATHS = new Set(['/healthz', '/livez', '/readyz', '/version']);

/**
 * Who asks: a known bearer token's user. A token the server does not know is refused everywhere,
 * as kube-apiserver's authenticator refuses it before anonymous access is considered; no token
 * at all is refused too where credentials are required, except for the public health and
 * version paths.
 */
export function authenticate(ctx: ServerContext, req: IncomingMessage, pathname: string): UserInfo | undefined {
  const bearer = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1]?.trim();
  if (bearer) {
    const user = Object.hasOwn(ctx.tokens ?? {}, bearer) ? ctx.tokens?.[bearer] : undefined;
    if (!user) throw unauthorized();
    return user;
  }
  if (!ctx.requireCredentials) return ADMIN;
  if (req.method === 'GET' && PUBLIC_INFO_PATHS.has(pathname.replace(/\/+$/, ''))) return undefined;
  throw unauthorized();
}

type ResourceRoute = Extract<Route, { kind: 'resource' }>;

/** A request to a resource: where it goes, who asks, and how the answer is shown. */
type ResourceCall = {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  path: string;
  query: URLSearchParams;
  route: ResourceRoute;
  user: UserInfo;
  write: WriteOptions;
  /** kubectl's `Accept: …;as=Table`: objects are shown as Table rows. */
  table: boolean;
};

/** The server's request listener: the request served, or its error sent as a Status. */
export function requestListener(ctx: ServerContext): RequestListener {
  return (req, res) => {
    handleRequest(ctx, req, res).catch((e: unknown) => sendError(res, e));
  };
}

function sendError(res: ServerResponse, e: unknown): void {
  const err = e instanceof ApiError ? e : internal((e as Error).message ?? String(e));
  if (res.headersSent) {
    res.end();
    return;
  }
  sendJson(res, err.status.code, err.status);
}

async function handleRequest(ctx: ServerContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://sim');
  const user = authenticate(ctx, req, url.pathname);
  if (req.method === 'POST' && url.pathname === TOKEN_REVIEWS) {
    return sendJson(res, 201, reviewToken((await readBody(req)) as KubeObject, ctx.tokens ?? {}));
  }
  const route = parseRoute(url.pathname, minorOf(ctx.version));
  if (route.kind === 'discovery') return serveDiscovery(res, url.pathname, ctx.serverAddress(), ctx.version);
  if (route.kind === 'unknown') throw notFound('', '', url.pathname);
  const missing = unavailableFeatureOf(route.type.group, route.subresource);
  if (missing) throw unavailable(missing, ctx.dashboardUrl);
  if (!user) throw unauthorized();
  const call = resourceCall(req, res, url, route, user);
  switch (call.method) {
    case 'GET':
      return serveGet(ctx, call);
    case 'POST':
      return servePost(ctx, call);
    case 'PUT':
      return servePut(ctx, call);
    case 'PATCH':
      return servePatch(ctx, call);
    case 'DELETE':
      return serveDelete(ctx, call);
    default:
      throw notSupported(call);
  }
}

/** TokenReview (authentication.k8s.io/v1): a known token is its user, any other is refused. */
function reviewToken(review: KubeObject, tokens: Record<string, UserInfo>): KubeObject {
  const token = (review['spec'] as { token?: unknown } | undefined)?.token;
  // Own keys only: a token named `constructor` or `__proto__` is no one.
  const user = typeof token === 'string' && Object.hasOwn(tokens, token) ? tokens[token] : undefined;
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

function serveDiscovery(res: ServerResponse, path: string, serverAddress: string, version: ServedVersion): void {
  const doc = discoveryDocument(path, serverAddress, version);
  if (doc === undefined) throw notFound('', '', path);
  if (typeof doc === 'string') sendText(res, doc);
  else sendJson(res, 200, doc);
}

function resourceCall(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  route: ResourceRoute,
  user: UserInfo,
): ResourceCall {
  const query = url.searchParams;
  return {
    req,
    res,
    method: req.method ?? 'GET',
    path: url.pathname,
    query,
    route,
    user,
    write: { dryRun: query.get('dryRun') === 'All', user, warn: (text: string) => addWarning(res, text) },
    table: wantsTable(req.headers.accept),
  };
}

function notSupported(call: ResourceCall): ApiError {
  return methodNotAllowed(`${call.method} is not supported on ${call.path}`);
}

/** `?fieldSelector=…&labelSelector=…`: an object matches when it matches both. */
function selectorsOf(query: URLSearchParams): Matcher {
  const fieldMatch = parseFieldSelector(query.get('fieldSelector'));
  const labelMatch = parseLabelSelector(query.get('labelSelector'));
  return (o: KubeObject) => fieldMatch(o) && labelMatch(o);
}

function serveGet(ctx: ServerContext, call: ResourceCall): void {
  const { name, subresource, namespace } = call.route;
  const watch = call.query.get('watch');
  if (name && subresource === 'log' && namespace) servePodLog(ctx, call, namespace, name);
  else if (name && subresource === 'scale')
    sendJson(call.res, 200, toScale(ctx.handlers.get(call.route.type, namespace, name)));
  else if (name) serveObject(ctx, call, name);
  else if (watch === '1' || watch === 'true') startWatch(ctx, call, selectorsOf(call.query));
  else serveList(ctx, call);
}

/** An object as JSON: a stored object's shared encoding, anything else encoded now. */
function sendObject(ctx: ServerContext, res: ServerResponse, code: number, obj: unknown): void {
  sendJsonBytes(res, code, ctx.store.jsonBytes(obj));
}

type ObjectList = ReturnType<ResourceHandlers['list']>;

const COMMA = Buffer.from(',');
const LIST_END = Buffer.from(']}');

/** A list as JSON.stringify writes it (`items` last), its items' encodings shared. */
function sendList(ctx: ServerContext, res: ServerResponse, list: ObjectList): void {
  const { items, ...head } = list;
  const parts: Buffer[] = [Buffer.from(`${JSON.stringify(head).slice(0, -1)},"items":[`, 'utf8')];
  items.forEach((o, i) => {
    if (i > 0) parts.push(COMMA);
    parts.push(ctx.store.jsonBytes(o));
  });
  parts.push(LIST_END);
  sendJsonBytes(res, 200, Buffer.concat(parts));
}

function serveObject(ctx: ServerContext, call: ResourceCall, name: string): void {
  const { type, namespace } = call.route;
  const obj = ctx.handlers.get(type, namespace, name);
  if (call.table)
    sendJson(
      call.res,
      200,
      toTable(type.resource, [obj], obj.metadata.resourceVersion as string, ctx.now(), includeObjectOf(call.query)),
    );
  else sendObject(ctx, call.res, 200, obj);
}

function serveList(ctx: ServerContext, call: ResourceCall): void {
  const { type, namespace } = call.route;
  const list = ctx.handlers.list(type, namespace, selectorsOf(call.query));
  const include = includeObjectOf(call.query);
  if (call.table)
    sendJson(call.res, 200, toTable(type.resource, list.items, list.metadata.resourceVersion, ctx.now(), include));
  else sendList(ctx, call.res, list);
}

/** `pods/{name}/log`, with `?container=` and `?tailLines=`. */
function servePodLog(ctx: ServerContext, call: ResourceCall, namespace: string, name: string): void {
  const pod = ctx.handlers.get(call.route.type, namespace, name);
  const text = ctx.podLog?.(pod, call.query.get('container') ?? undefined);
  if (text === undefined) throw badRequest(`container logs of pod "${name}" are not available`);
  sendText(call.res, lastLines(text, Number(call.query.get('tailLines') ?? 0)));
}

/** The last `count` lines of a log ending in a newline; all of it when `count` is not positive. */
function lastLines(text: string, count: number): string {
  return count > 0
    ? text
        .split('\n')
        .slice(-count - 1)
        .join('\n')
    : text;
}

/** A watch stays open until its timeout, its client or the server ends it. */
function startWatch(ctx: ServerContext, call: ResourceCall, match: Matcher): void {
  const { type, namespace } = call.route;
  const resourceVersion = call.query.get('resourceVersion');
  const request = {
    type,
    ...(namespace !== undefined ? { namespace } : {}),
    match,
    ...(resourceVersion !== null ? { resourceVersion } : {}),
    timeoutSeconds: Number(call.query.get('timeoutSeconds') ?? 0),
    allowBookmarks: call.query.get('allowWatchBookmarks') === 'true',
    bookmarkIntervalMs: ctx.bookmarkIntervalMs,
    ...(call.table
      ? {
          render: (o: KubeObject) =>
            toTable(type.resource, [o], o.metadata.resourceVersion as string, ctx.now(), includeObjectOf(call.query)),
        }
      : {}),
  };
  serveWatch(ctx.store, ctx.watchLines, request, call.res, (finish) => {
    ctx.watches.add(finish);
    call.res.on('close', () => ctx.watches.delete(finish));
  });
}

async function servePost(ctx: ServerContext, call: ResourceCall): Promise<void> {
  const { type, namespace, name, subresource } = call.route;
  const body = (await readBody(call.req)) as KubeObject;
  if (subresource === 'binding' && name && namespace) {
    ctx.handlers.bind(type, namespace, name, body, call.write);
    return sendJson(call.res, 201, successStatus(undefined));
  }
  if (name) throw notSupported(call);
  sendObject(ctx, call.res, 201, await ctx.handlers.create(type, namespace, body, call.write));
}

async function servePut(ctx: ServerContext, call: ResourceCall): Promise<void> {
  const { type, namespace, name, subresource } = call.route;
  if (!name) throw notSupported(call);
  const body = (await readBody(call.req)) as KubeObject;
  if (subresource === 'scale')
    return sendJson(call.res, 200, await ctx.handlers.scale(type, namespace, name, body, undefined, call.write));
  sendObject(ctx, call.res, 200, await ctx.handlers.update(type, namespace, name, body, subresource, call.write));
}

async function servePatch(ctx: ServerContext, call: ResourceCall): Promise<void> {
  const { type, namespace, name, subresource } = call.route;
  if (!name) throw notSupported(call);
  const patchType = patchTypeOf(call.req.headers['content-type']);
  const body = await readBody(call.req);
  if (subresource === 'scale')
    return sendJson(call.res, 200, await ctx.handlers.scale(type, namespace, name, body, patchType, call.write));
  const patched = await ctx.handlers.patch(type, namespace, name, subresource, patchType, body, call.write);
  sendObject(ctx, call.res, 200, patched);
}

/** One object, or every object of a collection that matches the selectors (each on its own). */
async function serveDelete(ctx: ServerContext, call: ResourceCall): Promise<void> {
  const { type, namespace, name } = call.route;
  const options = readDeleteOptions(call.query, await readBody(call.req), call.user);
  if (name) return sendObject(ctx, call.res, 200, await ctx.handlers.delete(type, namespace, name, options));
  const list = ctx.handlers.list(type, namespace, selectorsOf(call.query));
  for (const o of list.items) {
    // An object that cannot be deleted (gone meanwhile, refused) does not stop the rest.
    await ctx.handlers.delete(type, o.metadata.namespace, o.metadata.name, options).catch(() => undefined);
  }
  sendList(ctx, call.res, list);
}
