/**
 * The simulated Kubernetes API server over HTTP or HTTPS: discovery, CRUD, watch, patch, binding
 * and admission, on a loopback port. Real clients (kubectl, @kubernetes/client-node) talk to it
 * unchanged; `close()` ends every open watch so nothing outlives it.
 */
import http, { type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { AdmissionSources } from './admission.js';
import { DEFAULT_SERVED_VERSION, type ServedVersion, servesMatchConditions } from './discovery.js';
import { createMatchConditionEvaluator } from './match-conditions.js';
import { ObjectStore } from './object-store.js';
import { ADMIN, type PodLogReader, requestListener, type ServerContext } from './request-handler.js';
import { parseRoute } from './request-route.js';
import { ResourceHandlers, type UserInfo } from './resource-handlers.js';
import type { ResourceType } from './resource-registry.js';
import { SharedEventLines } from './watch-stream.js';

export type ApiServerOptions = {
  host?: string;
  port?: number;
  now?: () => Date;
  /** Maps a webhook's `clientConfig.service` to a URL (the sim has no Service network). */
  resolveService?: AdmissionSources['resolveService'];
  onAdmissionCall?: AdmissionSources['onCall'];
  /** `pods/{name}/log`: what the kubelet would stream (the sim reads its container log files). */
  podLog?: PodLogReader;
  bookmarkIntervalMs?: number;
  /** Namespaces that exist from the start besides default, kube-system, kube-public, kube-node-lease. */
  namespaces?: string[];
  /**
   * Bearer tokens and the users they stand for (webhooks see them in `userInfo`, as they would see
   * service accounts). A request with any other token is refused (401).
   */
  tokens?: Record<string, UserInfo>;
  /**
   * Serve HTTPS with this certificate and require a known token on every request but
   * `/healthz`, `/livez`, `/readyz` and `/version`, as a real API server does (kubectl sends a
   * token only over TLS). Without it: plain HTTP, and a request without a token is the cluster
   * admin, for in-process tests only.
   */
  secure?: { certPem: string; keyPem: string };
  /**
   * The version to be (default 1.26): what `/version` reports, and whether webhook matchConditions
   * are evaluated (1.32) or, as before 1.28, not there at all.
   */
  kubernetesVersion?: ServedVersion;
  /** The control plane's dashboard: what exec, port-forward and top point people to instead. */
  dashboardUrl?: string;
  /** Presented to every webhook as a bearer token (kube-apiserver's AdmissionConfiguration kubeconfig). */
  webhookToken?: string;
};

export type SimApiServer = {
  readonly url: string;
  readonly store: ObjectStore;
  readonly handlers: ResourceHandlers;
  close(): Promise<void>;
};

/** Namespaces every cluster has. */
const BUILT_IN_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

export async function startApiServer(opts: ApiServerOptions = {}): Promise<SimApiServer> {
  const now = opts.now ?? (() => new Date());
  const version = opts.kubernetesVersion ?? DEFAULT_SERVED_VERSION;
  const store = new ObjectStore();
  const handlers = new ResourceHandlers(store, admissionSources(store, opts, version), now);
  await createNamespaces(store, handlers, [...BUILT_IN_NAMESPACES, ...(opts.namespaces ?? [])]);
  let serverAddress = '127.0.0.1:0';
  const ctx: ServerContext = {
    store,
    watchLines: new SharedEventLines(store),
    handlers,
    now,
    tokens: opts.tokens,
    requireCredentials: opts.secure !== undefined,
    podLog: opts.podLog,
    bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 10_000,
    serverAddress: () => serverAddress,
    watches: new Set(),
    version,
    ...(opts.dashboardUrl ? { dashboardUrl: opts.dashboardUrl } : {}),
  };
  const listener = requestListener(ctx);
  const server = opts.secure
    ? https.createServer({ cert: opts.secure.certPem, key: opts.secure.keyPem }, listener)
    : http.createServer(listener);
  server.keepAliveTimeout = 5_000;
  const addr = await listen(server, opts.port ?? 0, opts.host ?? '127.0.0.1');
  serverAddress = `${addr.address}:${addr.port}`;
  return {
    url: `${opts.secure ? 'https' : 'http'}://${addr.address}:${addr.port}`,
    store,
    handlers,
    close: () => closeServer(server, ctx.watches),
  };
}

/** Admission reads the webhook configurations and namespace labels from the store itself. */
function admissionSources(store: ObjectStore, opts: ApiServerOptions, version: ServedVersion): AdmissionSources {
  return {
    mutating: () => store.list('admissionregistration.k8s.io/mutatingwebhookconfigurations') as never,
    validating: () => store.list('admissionregistration.k8s.io/validatingwebhookconfigurations') as never,
    namespaceLabels: (ns) => store.get('/namespaces', undefined, ns)?.metadata.labels ?? {},
    ...(opts.resolveService ? { resolveService: opts.resolveService } : {}),
    ...(opts.onAdmissionCall ? { onCall: opts.onAdmissionCall } : {}),
    ...(opts.webhookToken ? { webhookToken: opts.webhookToken } : {}),
    // Servers before 1.28 had no matchConditions (the control plane registers none for them).
    ...(servesMatchConditions(version) ? { matchConditions: createMatchConditionEvaluator() } : {}),
  };
}

async function createNamespaces(store: ObjectStore, handlers: ResourceHandlers, names: string[]): Promise<void> {
  const nsType = parseRoute('/api/v1/namespaces') as { type: ResourceType };
  for (const name of names) {
    if (!store.get('/namespaces', undefined, name)) {
      await handlers.create(nsType.type, undefined, { metadata: { name } }, { dryRun: false, user: ADMIN });
    }
  }
}

async function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return server.address() as AddressInfo;
}

/** Ends every open watch first: a watch's response would otherwise keep the server open. */
async function closeServer(server: Server, watches: Set<() => void>): Promise<void> {
  for (const finish of [...watches]) finish();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
