/**
 * The whole simulated cluster in one process, over real protocols: the API server, vcuda's
 * control plane (one or more replicas behind a Service-like proxy, sharing one ledger), a
 * kube-scheduler-like loop calling the extender, and per node a kubelet plus vcuda's node agent.
 * `vcuda local` runs it for people; the end-to-end tests run it for CI.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Logger, pino } from 'pino';
import { parseAllDocuments } from 'yaml';
import { resourceNames } from '../contract/index.js';
import { redactingLogHooks } from '../contract/redact.js';
import type { BindFaults } from '../control-plane/extender/binder.js';
import type { RunningControlPlane } from '../control-plane/server.js';
import { closeDb, connectDb, type VcudaDb } from '../db/connect.js';
import { createQuotaAdmin } from '../db/quotas.js';
import { type SimApiServer, startApiServer } from './apiserver/api-server.js';
import { minorOf, type ServedVersion } from './apiserver/discovery.js';
import { ADMIN } from './apiserver/request-handler.js';
import type { UserInfo } from './apiserver/resource-handlers.js';
import { type ClusterSpec, DEFAULT_CLUSTER, expandNodes, type SimNode } from './cluster-spec.js';
import {
  type ControlPlaneService,
  controlPlaneReplicas,
  type ReplicaConfigSettings,
} from './control-plane-replicas.js';
import { type SimControllerManager, startControllerManager } from './controllers/controller-manager.js';
import { KubeApiError, KubeClient } from './kube-client.js';
import { writeKubeconfig } from './kubeconfig.js';
import { claimDataDir } from './local-ledger.js';
import { type LocalNode, startLocalNode } from './node/local-node.js';
import { publishedJwks } from './node/published-jwks.js';
import type { SimNodeOptions } from './node/sim-node.js';
import { loadSchedulerConfig, type SchedulerConfig } from './scheduler/scheduler-config.js';
import { type SimScheduler, startScheduler } from './scheduler/scheduler-loop.js';
import { type ServiceProxy, startServiceProxy } from './service-proxy.js';
import { createServingCert } from './tls/self-signed-cert.js';
import { prepareWorkDir } from './work-dir.js';

// The checkout's root: the parent of sim/, or of dist/sim/ when running the compiled build.
const repoRoot = findCheckoutRoot(dirname(fileURLToPath(import.meta.url)));
export const NATIVE_BUILD_DIR = join(repoRoot, 'native', 'build');
export const WORKLOAD_DIR = join(repoRoot, 'sim', '.vcuda', 'build');
const SCHEDULER_CONFIG = join(repoRoot, 'deploy', 'scheduler', 'kube-scheduler-config.yaml');
const DEVICE_CLASS = join(repoRoot, 'deploy', 'overlays', 'dra', 'device-class.yaml');
/** Where deploy/scheduler/scheduler-deployment.yaml mounts the scheduler's client certificate. */
const SCHEDULER_TLS_MOUNT = '/etc/vcuda-scheduler-tls';

/** In the work directory: the bearer token the API server presents to the webhooks. */
const WEBHOOK_CALLER_TOKEN_FILE = 'webhook-caller-token';

const CONTROL_PLANE_USER = 'system:serviceaccount:vcuda-system:vcuda-control-plane';
const NODE_AGENT_USER = 'system:serviceaccount:vcuda-system:vcuda-node-agent';

export type LocalClusterOptions = {
  cluster?: ClusterSpec;
  /** Plain-HTTP port of the control plane's Service (dashboard, extender, API); 0 = any. */
  port?: number;
  replicas?: number;
  /** Existing directory for state, or a fresh temp dir removed on close. */
  workDir?: string;
  /** postgres://… for a real ledger; absent = embedded PGlite (in `dataDir`, or in memory). */
  databaseUrl?: string;
  /** PGlite's data directory, kept across runs and claimed by this one; absent (and no url): in memory. */
  dataDir?: string;
  logLevel?: 'silent' | 'error' | 'warn' | 'info' | 'debug';
  schedulerBackoffMs?: { initial: number; max: number };
  /** false: the scheduler opens a connection per extender call, so the Service spreads them over replicas. */
  schedulerExtenderKeepAlive?: boolean;
  /** Told when each start-up step is done (for progress lines and timing). */
  onProgress?: (step: string) => void;
  /** Resource domain of every component (`tencent.com` to try a gpu-manager migration); default nvidia.com. */
  resourceDomain?: string;
  /** The dashboard's idle view: allocations idle this long (minutes; default 2, a cluster's is 30). */
  idleForMinutes?: number;
  /** How often node agents report usage to the control plane (ms); default the agent's (10 s). */
  usageReportMs?: number;
  /**
   * Node agents' heartbeat period (ms; default 10 s) and how old a heartbeat may be before the
   * control plane stops placing pods there and the dashboard shows the node not reporting
   * (seconds, at least 5; default 60).
   */
  heartbeat?: { periodMs?: number; staleSeconds?: number };
  /**
   * true: each node (kubelet + node agent) runs in a process of its own, as on a real cluster, so
   * nodes work beside the API server, scheduler and control plane; false (default): all in this
   * process, where tests can reach a node's internals (`inThisProcess`).
   */
  nodeProcesses?: boolean;
  /**
   * The Kubernetes version the API server claims (default 1.26): from 1.28 on the control plane
   * registers its webhooks with matchConditions, which the API server then evaluates (CEL); 1.36
   * serves `resource.k8s.io/v1`, the scheduler allocates claims and the controller manager runs the
   * resourceclaim controller.
   */
  kubernetesVersion?: ServedVersion;
  /** Fault injection for tests: replica `i`'s hook at each step of its binds (see BindFaults). */
  bindFaults?: (replica: number) => BindFaults | undefined;
};

/**
 * Made afresh for each cluster, so nobody else on the machine can know them: the API server's
 * certificate (its CA is in the kubeconfig) and each caller's bearer token.
 */
export type ApiAccess = {
  caPem: string;
  certPem: string;
  keyPem: string;
  /** kubectl's (the kubeconfig's) and the in-process components' token: the cluster admin. */
  adminToken: string;
  controlPlaneToken: string;
  /** Each node's agent token, bound to its node. */
  nodeAgentTokens: Record<string, string>;
};

export type LocalCluster = {
  readonly api: SimApiServer;
  readonly apiAccess: ApiAccess;
  readonly client: KubeClient;
  /** The control plane's Service, plain HTTP: the URL people use (dashboard, reports, metrics). */
  readonly url: string;
  /** The Service's extender port (HTTPS, the scheduler's client certificate only). */
  readonly extenderUrl: string;
  readonly kubeconfigPath: string;
  readonly workDir: string;
  readonly cluster: ClusterSpec;
  readonly db: VcudaDb;
  readonly nodes: LocalNode[];
  readonly scheduler: SimScheduler;
  /** The control plane's Service: where a replica run elsewhere (its own process) is added as a backend. */
  readonly service: ControlPlaneService;
  /** What every replica's configuration is made of (control-plane-replicas.ts `replicaConfig`). */
  readonly replicaSettings: ReplicaConfigSettings;
  replicas(): (RunningControlPlane | undefined)[];
  /** Stops replica `i` at once (its in-flight requests fail), as a crashed pod. */
  killReplica(i: number): Promise<void>;
  startReplica(i: number): Promise<void>;
  close(): Promise<void>;
};

export async function startLocalCluster(opts: LocalClusterOptions = {}): Promise<LocalCluster> {
  const { workDir, isOwn } = prepareWorkDir(opts.workDir);
  const logLevel = opts.logLevel ?? 'warn';
  const logger = pino({ level: logLevel, name: 'vcuda-local', hooks: redactingLogHooks });
  const closers = closerStack((m) => logger.warn(m));
  const close = async () => {
    await closers.closeAll();
    if (isOwn) rmSync(workDir, { recursive: true, force: true });
  };
  try {
    return { ...(await bootCluster(opts, { workDir, logLevel, logger }, closers)), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * vcuda's DeviceClasses as the DRA overlay ships them, created in a 1.36 cluster (what `vcuda local
 * --dra` does); a class already there is left as it is, so a lost one can be put back.
 */
export async function installDeviceClass(client: KubeClient): Promise<void> {
  for (const doc of parseAllDocuments(readFileSync(DEVICE_CLASS, 'utf8'))) {
    await client.create('/apis/resource.k8s.io/v1/deviceclasses', doc.toJS()).catch((err: unknown) => {
      if (!(err instanceof KubeApiError && err.code === 409)) throw err;
    });
  }
}

/** The simulated API server, a client of it and a kubeconfig for kubectl. */
async function startLocalApi(
  opts: LocalClusterOptions,
  cluster: ClusterSpec,
  workDir: string,
  service: { webhookPort: number; dashboardPort: number },
  closers: CloserStack,
) {
  const access = await createApiAccess(cluster);
  // The token it presents to the webhooks, so they know its reviews from anyone else's.
  const webhookCallerTokenFile = join(workDir, WEBHOOK_CALLER_TOKEN_FILE);
  const webhookToken = randomBytes(24).toString('base64url');
  writeFileSync(webhookCallerTokenFile, webhookToken, { mode: 0o600 });
  const api = await startClusterApi(workDir, service, {
    kubernetesVersion: opts.kubernetesVersion,
    webhookToken,
    access,
  });
  closers.push(() => api.close());
  const admin = { token: access.adminToken, caPem: access.caPem };
  const client = new KubeClient(api.url, admin);
  const kubeconfigPath = join(workDir, 'kubeconfig');
  writeKubeconfig(kubeconfigPath, api.url, admin);
  opts.onProgress?.('API server');
  return { api, apiAccess: access, client, kubeconfigPath };
}

type BootContext = { workDir: string; logLevel: NonNullable<LocalClusterOptions['logLevel']>; logger: Logger };

/** The ledger's connection (not awaited: embedded PGlite takes seconds, and nodes boot meanwhile) and the replicas. */
async function startLedgerAndReplicas(
  opts: LocalClusterOptions,
  { workDir, logLevel, logger }: BootContext,
  where: { cluster: ClusterSpec; domain: string; service: ControlPlaneService; apiUrl: string; access: ApiAccess },
  closers: CloserStack,
) {
  const release = !opts.databaseUrl && opts.dataDir ? claimDataDir(opts.dataDir) : undefined;
  if (release) closers.push(async () => release());
  const dbReady = connectDb(
    opts.databaseUrl ? { url: opts.databaseUrl } : opts.dataDir ? { dataDir: opts.dataDir } : {},
  );
  closers.push(() => dbReady.then(closeDb, () => undefined));
  const replicaCount = Math.max(1, opts.replicas ?? 1);
  const replicaSettings: ReplicaConfigSettings = {
    cluster: where.cluster,
    domain: where.domain,
    logLevel,
    // A demo's idle pods show in the idle view within minutes, not after half an hour.
    idleForMinutes: opts.idleForMinutes ?? 2,
    ...(opts.heartbeat?.staleSeconds ? { heartbeatStaleSeconds: opts.heartbeat.staleSeconds } : {}),
    webhookCallerTokenFile: join(workDir, WEBHOOK_CALLER_TOKEN_FILE),
    dra: servesDra(opts.kubernetesVersion),
  };
  const replicas = await controlPlaneReplicas(replicaCount, where.service, {
    ...replicaSettings,
    db: dbReady,
    apiUrl: where.apiUrl,
    apiCredentials: { token: where.access.controlPlaneToken, caPem: where.access.caPem },
    logger,
    ...(opts.bindFaults ? { bindFaults: opts.bindFaults } : {}),
  });
  return { dbReady, replicas, replicaCount, replicaSettings };
}

/** Starts each component in order, pushing its closer as soon as it runs. */
async function bootCluster(
  opts: LocalClusterOptions,
  { workDir, logLevel, logger }: BootContext,
  closers: CloserStack,
): Promise<Omit<LocalCluster, 'close'>> {
  const cluster = opts.cluster ?? DEFAULT_CLUSTER;
  const domain = resourceNames(opts.resourceDomain).domain;
  const service = await startControlPlaneService(opts.port ?? 0);
  closers.push(service.close);
  // 1. The API server, with a token per component so webhooks see service accounts.
  const ports = { webhookPort: service.https.port, dashboardPort: service.http.port };
  const { api, apiAccess, client, kubeconfigPath } = await startLocalApi(opts, cluster, workDir, ports, closers);

  // 2. The ledger, shared by every replica, and 3. control-plane replicas behind the Service.
  const { dbReady, replicas, replicaCount, replicaSettings } = await startLedgerAndReplicas(
    opts,
    { workDir, logLevel, logger },
    { cluster, domain, service, apiUrl: api.url, access: apiAccess },
    closers,
  );
  const url = `http://127.0.0.1:${service.http.port}`;

  // 4. Nodes: kubelet + node agent each; they verify assignments with the published JWKS.
  const nodes = await startNodes({
    cluster,
    workDir,
    domain,
    client,
    apiUrl: api.url,
    access: apiAccess,
    jwks: publishedJwks(client, { fallback: () => replicas.list().find(Boolean)?.jwks }),
    // The Service's URL is known before the replicas start; reports fail (logged) until then.
    usage: { controlPlaneUrl: url, ...(opts.usageReportMs ? { periodMs: opts.usageReportMs } : {}) },
    log: logger,
    logLevel,
    inProcesses: opts.nodeProcesses ?? false,
    ...(opts.heartbeat?.periodMs ? { heartbeatPeriodMs: opts.heartbeat.periodMs } : {}),
    ...(servesDra(opts.kubernetesVersion) ? { agentMode: 'dra' as const } : {}),
  });
  closers.push(async () => {
    for (const n of nodes) await n.close();
  });
  opts.onProgress?.(`${nodes.length} node(s): kubelet + node agent`);

  const db = await dbReady;
  closers.push(replicas.stopAll);
  await replicas.startAll();
  opts.onProgress?.(`control plane (${replicaCount} replica${replicaCount > 1 ? 's' : ''})`);
  await setNamespaceQuotas(db, cluster);

  // 5. The scheduler, pointed at the Service's extender port.
  const extenderUrl = `https://127.0.0.1:${service.extender.port}`;
  const scheduler = await startClusterScheduler(client, workDir, extenderUrl, domain, opts);
  closers.push(() => scheduler.close());

  // 6. The controller manager: Deployments, ReplicaSets, Jobs, resource claims (1.36) and garbage collection.
  startControllers(opts, client, logger, closers);
  const { list, stop, start } = replicas;
  return {
    api,
    apiAccess,
    client,
    url,
    extenderUrl,
    kubeconfigPath,
    workDir,
    cluster,
    db,
    nodes,
    scheduler,
    service,
    replicaSettings,
    replicas: list,
    killReplica: stop,
    startReplica: start,
  };
}

function startControllers(opts: LocalClusterOptions, client: KubeClient, logger: Logger, closers: CloserStack): void {
  const controllers: SimControllerManager = startControllerManager({
    client,
    dynamicResources: servesDra(opts.kubernetesVersion),
    onError: (m) => logger.debug(`controller-manager: ${m}`),
  });
  closers.push(() => controllers.close());
}

type CloserStack = { push(closer: () => Promise<void>): void; closeAll(): Promise<void> };

/** How long one part may take to close before the rest are closed without it. */
const CLOSE_DEADLINE_MS = 20_000;

/**
 * What has started, closed last-started first; a close that fails is logged and the rest still run,
 * and one that has not finished by its deadline is logged and left behind, so a stuck part cannot
 * hold the others open.
 */
function closerStack(warn: (m: string) => void): CloserStack {
  const closers: (() => Promise<void>)[] = [];
  return {
    push: (closer) => {
      closers.push(closer);
    },
    closeAll: async () => {
      for (const [i, c] of closers.reverse().entries()) {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<void>((resolve) => {
          timer = setTimeout(() => {
            warn(
              `shutdown: part ${i + 1} of ${closers.length} still closing after ${CLOSE_DEADLINE_MS / 1000} s; going on`,
            );
            resolve();
          }, CLOSE_DEADLINE_MS);
          timer.unref();
        });
        const closed = c().catch((e) => warn(`shutdown: ${(e as Error).message}`));
        await Promise.race([closed, late]);
        clearTimeout(timer);
      }
      closers.length = 0;
    },
  };
}

/** The control plane's Service, its three proxies started before any replica is there. */
async function startControlPlaneService(
  httpPort: number,
): Promise<ControlPlaneService & { close: () => Promise<void> }> {
  const started: ServiceProxy[] = [];
  const close = async () => {
    for (const proxy of started.reverse()) await proxy.close();
  };
  const start = async (opts: { port?: number }) => {
    const proxy = await startServiceProxy(opts);
    started.push(proxy);
    return proxy;
  };
  try {
    const http = await start({ port: httpPort });
    const https = await start({});
    const extender = await start({});
    return { http, https, extender, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The bearer token of each component, and the service account it stands for. */
function componentTokens(access: ApiAccess): Record<string, UserInfo> {
  const serviceAccount = { groups: ['system:serviceaccounts', 'system:authenticated'] };
  const tokens: Record<string, UserInfo> = {
    [access.adminToken]: ADMIN,
    [access.controlPlaneToken]: { username: CONTROL_PLANE_USER, ...serviceAccount },
  };
  // Each node's agent has its own token, bound to its node as a DaemonSet pod's projected token
  // is: its review names the node, so the control plane can check whose usage it is.
  for (const [node, token] of Object.entries(access.nodeAgentTokens)) {
    tokens[token] = {
      username: NODE_AGENT_USER,
      ...serviceAccount,
      extra: { [NODE_NAME_EXTRA]: [node] },
    };
  }
  return tokens;
}

function startClusterApi(
  workDir: string,
  service: { webhookPort: number; dashboardPort: number },
  settings: { kubernetesVersion: ServedVersion | undefined; webhookToken: string; access: ApiAccess },
): Promise<SimApiServer> {
  const { kubernetesVersion, webhookToken, access } = settings;
  return startApiServer({
    ...(kubernetesVersion ? { kubernetesVersion } : {}),
    dashboardUrl: `http://127.0.0.1:${service.dashboardPort}/`,
    webhookToken,
    namespaces: ['vcuda-system'],
    tokens: componentTokens(access),
    secure: { certPem: access.certPem, keyPem: access.keyPem },
    podLog: (pod, container) => {
      const spec = pod['spec'] as { nodeName?: string; containers?: { name: string }[] } | undefined;
      const name = container ?? spec?.containers?.[0]?.name;
      if (!spec?.nodeName || !name) return undefined;
      const file = join(workDir, 'nodes', spec.nodeName, 'kubelet', 'logs', `${pod.metadata['uid']}-${name}.log`);
      return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
    },
    // The webhook registration names the control plane's Service; it is the HTTPS proxy here.
    resolveService: (svc) =>
      svc.name === 'vcuda-control-plane' ? `https://127.0.0.1:${service.webhookPort}` : undefined,
  });
}

type NodeSettings = Pick<
  SimNodeOptions,
  'client' | 'apiUrl' | 'domain' | 'jwks' | 'usage' | 'log' | 'heartbeatPeriodMs' | 'agentMode'
> & {
  cluster: ClusterSpec;
  access: ApiAccess;
  workDir: string;
  logLevel: NonNullable<LocalClusterOptions['logLevel']>;
  /** Each node in a process of its own (which reads the published JWKS itself). */
  inProcesses: boolean;
};

/**
 * Every node of the cluster, booted side by side as a real cluster's kubelets and DaemonSet pods
 * are; when one fails, those that started are closed again.
 */
async function startNodes(settings: NodeSettings): Promise<LocalNode[]> {
  const { cluster, access, workDir, logLevel, inProcesses, client, jwks, log, usage, apiUrl, domain } = settings;
  const { heartbeatPeriodMs, agentMode } = settings;
  const startOne = (node: SimNode): Promise<LocalNode> =>
    startLocalNode(
      {
        cluster,
        nodeName: node.name,
        root: join(workDir, 'nodes', node.name),
        apiUrl,
        agentToken: access.nodeAgentTokens[node.name],
        // A node in a process of its own: its kubelet's client, over TLS to the API server.
        kubeletToken: access.adminToken,
        apiCaPem: access.caPem,
        domain,
        nativeBuildDir: NATIVE_BUILD_DIR,
        ...(existsSync(WORKLOAD_DIR) ? { workloadDir: WORKLOAD_DIR } : {}),
        ...(usage ? { usage } : {}),
        ...(heartbeatPeriodMs ? { heartbeatPeriodMs } : {}),
        ...(agentMode ? { agentMode } : {}),
        logLevel,
      },
      inProcesses ? undefined : { client, jwks, log },
    );
  const started = await Promise.allSettled(expandNodes(cluster).map(startOne));
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    for (const n of nodes) await n.close().catch(() => undefined);
    throw (failed as PromiseRejectedResult).reason;
  }
  return nodes;
}

/**
 * The cluster description's namespace quotas, each created when the ledger has none of that name:
 * a ledger kept across runs keeps what `vcuda quota set` changed.
 */
async function setNamespaceQuotas(db: VcudaDb, cluster: ClusterSpec): Promise<void> {
  const quotas = createQuotaAdmin(db, { clock: () => new Date() });
  const existing = new Set((await quotas.listQuotas()).map((q) => q.name));
  for (const [namespace, q] of Object.entries(cluster.quotas)) {
    if (existing.has(`ns-${namespace}`)) continue;
    await quotas.setQuota({
      name: `ns-${namespace}`,
      scope: 'namespace',
      cluster: cluster.name,
      namespace,
      coreLimit: q.core,
      memoryLimitMiB: q.memoryMiB,
    });
  }
}

/**
 * The scheduler, configured as deploy/ configures kube-scheduler, with its client certificate from
 * the Secret the control plane keeps.
 */
async function startClusterScheduler(
  client: KubeClient,
  workDir: string,
  extenderUrl: string,
  domain: string,
  opts: Pick<LocalClusterOptions, 'schedulerBackoffMs' | 'schedulerExtenderKeepAlive' | 'kubernetesVersion'>,
): Promise<SimScheduler> {
  const backoffMs = opts.schedulerBackoffMs;
  const tlsDir = await mountExtenderSecret(client, join(workDir, 'scheduler', 'extender-tls'));
  const config = withResourceDomain(
    await loadSchedulerConfig(SCHEDULER_CONFIG, extenderUrl, { [SCHEDULER_TLS_MOUNT]: tlsDir }),
    domain,
  );
  return startScheduler({
    client,
    config,
    extraSchedulerNames: ['default-scheduler'],
    // The configuration's podInitialBackoffSeconds / podMaxBackoffSeconds unless a test shortens them.
    ...(backoffMs ? { initialBackoffMs: backoffMs.initial, maxBackoffMs: backoffMs.max } : {}),
    ...(opts.schedulerExtenderKeepAlive === false ? { extenderKeepAlive: false } : {}),
    dynamicResources: servesDra(opts.kubernetesVersion),
  });
}

/**
 * A 1.36 cluster serves `resource.k8s.io/v1`: its scheduler allocates claims, its controller manager
 * makes and frees them, and its node agents are DRA drivers (the cards are reached through claims).
 */
function servesDra(version: ServedVersion | undefined): boolean {
  return version !== undefined && minorOf(version) >= 36;
}

/**
 * What the kubelet does for the scheduler's Secret volume: writes the client's files of Secret
 * vcuda-extender-tls (never `ca.key`) into `dir`.
 */
export async function mountExtenderSecret(client: KubeClient, dir: string): Promise<string> {
  const secret = await client.get('/api/v1/namespaces/vcuda-system/secrets/vcuda-extender-tls');
  const data = (secret['data'] ?? {}) as Record<string, string>;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const key of ['tls.crt', 'tls.key', 'ca.crt']) {
    const value = data[key];
    if (!value) throw new Error(`Secret vcuda-system/vcuda-extender-tls lacks ${key}`);
    writeFileSync(join(dir, key), Buffer.from(value, 'base64'), { mode: 0o600 });
  }
  return dir;
}

export type { ServiceProxy };

/** TokenReview's `status.user.extra` key naming the node a service account token is bound to. */
const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

/** A fresh certificate for the API server on 127.0.0.1, and a random token per caller. */
async function createApiAccess(cluster: ClusterSpec): Promise<ApiAccess> {
  const token = () => randomBytes(32).toString('base64url');
  const serving = await createServingCert({ hosts: ['127.0.0.1', 'localhost'], validDays: 365 });
  return {
    ...serving,
    adminToken: token(),
    controlPlaneToken: token(),
    nodeAgentTokens: Object.fromEntries(expandNodes(cluster).map((n) => [n.name, token()])),
  };
}

/** The shipped scheduler configuration names nvidia.com resources; local mode may run another domain. */
function withResourceDomain(config: SchedulerConfig, domain: string): SchedulerConfig {
  const rename = (name: string) => name.replace(/^nvidia\.com\//, `${domain}/`);
  return {
    ...config,
    extenders: config.extenders.map((e) => ({
      ...e,
      managedResources: e.managedResources.map((r) => ({ ...r, name: rename(r.name) })),
    })),
  };
}

function findCheckoutRoot(simDir: string): string {
  const parent = join(simDir, '..');
  return basename(parent) === 'dist' && existsSync(join(parent, '..', 'native')) ? join(parent, '..') : parent;
}
