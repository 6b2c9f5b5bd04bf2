/**
 * The whole simulated cluster in one process, over real protocols: the API server, vcuda's
 * control plane (one or more replicas behind a Service-like proxy, sharing one ledger), a
 * kube-scheduler-like loop calling the extender, and per node a kubelet plus vcuda's node agent.
 * `vcuda local` runs it for people; the end-to-end tests run it for CI.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { JSONWebKeySet } from 'jose';
import { pino } from 'pino';
import { resourceNames } from '../contract/index.js';
import { loadControlPlaneConfig } from '../control-plane/config.js';
import { type RunningControlPlane, startControlPlane } from '../control-plane/server.js';
import { JWKS_CONFIGMAP_KEY, JWKS_CONFIGMAP_NAME } from '../control-plane/signing-keys.js';
import { closeDb, connectDb, type VcudaDb } from '../db/connect.js';
import { createQuotaAdmin } from '../db/quotas.js';
import { type SimApiServer, startApiServer } from './apiserver/api-server.js';
import type { UserInfo } from './apiserver/resource-handlers.js';
import { type ClusterSpec, DEFAULT_CLUSTER, expandNodes } from './cluster-spec.js';
import { KubeClient } from './kube-client.js';
import { kubeConfigFor, writeKubeconfig } from './kubeconfig.js';
import { type RunningSimNode, startSimNode } from './node/sim-node.js';
import { loadSchedulerConfig, type SchedulerConfig } from './scheduler/scheduler-config.js';
import { type SimScheduler, startScheduler } from './scheduler/scheduler-loop.js';
import { findFreePort, type ServiceProxy, startServiceProxy } from './service-proxy.js';

// The checkout's root: the parent of sim/, or of dist/sim/ when running the compiled build.
const repoRoot = findCheckoutRoot(dirname(fileURLToPath(import.meta.url)));
export const NATIVE_BUILD_DIR = join(repoRoot, 'native', 'build');
export const WORKLOAD_DIR = join(repoRoot, 'sim', '.vcuda', 'build');
const SCHEDULER_CONFIG = join(repoRoot, 'deploy', 'scheduler', 'kube-scheduler-config.yaml');
/** Where deploy/scheduler/scheduler-deployment.yaml mounts the scheduler's client certificate. */
const SCHEDULER_TLS_MOUNT = '/etc/vcuda-scheduler-tls';

const CONTROL_PLANE_USER = 'system:serviceaccount:vcuda-system:vcuda-control-plane';
const NODE_AGENT_USER = 'system:serviceaccount:vcuda-system:vcuda-node-agent';

export type LocalClusterOptions = {
  cluster?: ClusterSpec;
  /** Plain-HTTP port of the control plane's Service (dashboard, extender, API); 0 = any. */
  port?: number;
  replicas?: number;
  /** Existing directory for state, or a fresh temp dir removed on close. */
  workDir?: string;
  /** postgres://… for a real ledger; absent = embedded PGlite in memory. */
  databaseUrl?: string;
  logLevel?: 'silent' | 'error' | 'warn' | 'info' | 'debug';
  schedulerBackoffMs?: { initial: number; max: number };
  /** Told when each start-up step is done (for progress lines and timing). */
  onProgress?: (step: string) => void;
  /** Resource domain of every component (`tencent.com` to try a gpu-manager migration); default nvidia.com. */
  resourceDomain?: string;
  /** The dashboard's idle view: allocations idle this long (minutes; default 2, a cluster's is 30). */
  idleForMinutes?: number;
  /** How often node agents report usage to the control plane (ms); default the agent's (10 s). */
  usageReportMs?: number;
};

export type LocalCluster = {
  readonly api: SimApiServer;
  readonly client: KubeClient;
  /** The control plane's Service, plain HTTP: the URL people use (dashboard, reports, metrics). */
  readonly url: string;
  /** The Service's extender port (HTTPS, the scheduler's client certificate only). */
  readonly extenderUrl: string;
  readonly kubeconfigPath: string;
  readonly workDir: string;
  readonly cluster: ClusterSpec;
  readonly db: VcudaDb;
  readonly nodes: RunningSimNode[];
  readonly scheduler: SimScheduler;
  replicas(): (RunningControlPlane | undefined)[];
  /** Stops replica `i` at once (its in-flight requests fail), as a crashed pod. */
  killReplica(i: number): Promise<void>;
  startReplica(i: number): Promise<void>;
  close(): Promise<void>;
};

export async function startLocalCluster(opts: LocalClusterOptions = {}): Promise<LocalCluster> {
  const cluster = opts.cluster ?? DEFAULT_CLUSTER;
  const ownDir = !opts.workDir;
  if (ownDir) removeAbandonedWorkDirs(tmpdir());
  const workDir = opts.workDir ?? mkdtempSync(join(tmpdir(), WORK_DIR_PREFIX));
  mkdirSync(workDir, { recursive: true });
  if (ownDir) writeFileSync(join(workDir, OWNER_FILE), String(process.pid));
  const domain = resourceNames(opts.resourceDomain).domain;
  const logLevel = opts.logLevel ?? 'warn';
  const logger = pino({ level: logLevel, name: 'vcuda-local' });
  const log = {
    info: (m: string) => logger.info(m),
    warn: (m: string) => logger.warn(m),
    error: (m: string) => logger.error(m),
  };
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch((e) => log.warn(`shutdown: ${(e as Error).message}`));
    closers.length = 0;
    if (ownDir) rmSync(workDir, { recursive: true, force: true });
  };
  try {
    // 1. The API server, with a token per component so webhooks see service accounts.
    const serviceAccount = { groups: ['system:serviceaccounts', 'system:authenticated'] };
    const tokens: Record<string, UserInfo> = {
      'vcuda-control-plane-token': { username: CONTROL_PLANE_USER, ...serviceAccount },
      // Node-0's agent pod token, as a Kubernetes >= 1.30 API server reviews a projected one.
      'vcuda-node-agent-token': {
        username: NODE_AGENT_USER,
        ...serviceAccount,
        extra: { 'authentication.kubernetes.io/node-name': ['node-0'] },
      },
    };
    // Each node's agent has its own token, bound to its node as a DaemonSet pod's projected token
    // is: its review names the node, so the control plane can check whose usage it is.
    for (const node of expandNodes(cluster)) {
      tokens[nodeAgentToken(node.name)] = {
        username: NODE_AGENT_USER,
        ...serviceAccount,
        extra: { [NODE_NAME_EXTRA]: [node.name] },
      };
    }
    const httpService = await startServiceProxy({ port: opts.port ?? 0 });
    closers.push(() => httpService.close());
    const httpsService = await startServiceProxy();
    closers.push(() => httpsService.close());
    const extenderService = await startServiceProxy();
    closers.push(() => extenderService.close());
    const api = await startApiServer({
      namespaces: ['vcuda-system'],
      tokens,
      // The webhook registration names the control plane's Service; it is the HTTPS proxy here.
      podLog: (pod, container) => {
        const spec = pod['spec'] as { nodeName?: string; containers?: { name: string }[] } | undefined;
        const name = container ?? spec?.containers?.[0]?.name;
        if (!spec?.nodeName || !name) return undefined;
        const file = join(workDir, 'nodes', spec.nodeName, 'kubelet', 'logs', `${pod.metadata['uid']}-${name}.log`);
        return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
      },
      resolveService: (svc) =>
        svc.name === 'vcuda-control-plane' ? `https://127.0.0.1:${httpsService.port}` : undefined,
    });
    closers.push(() => api.close());
    const client = new KubeClient(api.url);
    const kubeconfigPath = join(workDir, 'kubeconfig');
    writeKubeconfig(kubeconfigPath, api.url);
    opts.onProgress?.('API server');

    // 2. The ledger, shared by every replica.
    // Embedded PGlite takes seconds to boot: it starts now and nodes boot meanwhile.
    const dbReady = connectDb(opts.databaseUrl ? { url: opts.databaseUrl } : {});
    closers.push(() => dbReady.then(closeDb, () => undefined));

    // 3. Control-plane replicas behind the Service.
    const replicaCount = Math.max(1, opts.replicas ?? 1);
    const running: (RunningControlPlane | undefined)[] = new Array(replicaCount).fill(undefined);
    const ports: { http: number; https: number; extender: number }[] = [];
    for (let i = 0; i < replicaCount; i++) {
      ports.push({ http: await findFreePort(), https: await findFreePort(), extender: await findFreePort() });
    }
    const refreshBackends = () => {
      httpService.setBackends(ports.filter((_, i) => running[i]).map((p) => p.http));
      httpsService.setBackends(ports.filter((_, i) => running[i]).map((p) => p.https));
      extenderService.setBackends(ports.filter((_, i) => running[i]).map((p) => p.extender));
    };
    const startReplica = async (i: number) => {
      const config = loadControlPlaneConfig({
        flags: {
          port: ports[i]!.http,
          host: '127.0.0.1',
          httpsPort: ports[i]!.https,
          extender: { port: ports[i]!.extender },
          clusterName: cluster.name,
          resourceDomain: domain,
          memoryUnitMiB: cluster.memoryUnitMiB,
          instanceId: `vcuda-control-plane-${i}`,
          kube: { mode: 'kubeconfig' },
          webhookRegistration: 'auto',
          webhook: { schedulerName: 'vcuda-scheduler' },
          // A demo's idle pods show in the idle view within minutes, not after half an hour.
          dashboard: { idleForMinutes: opts.idleForMinutes ?? 2 },
          logLevel,
        },
      });
      running[i] = await startControlPlane(config, {
        db: await dbReady,
        kubeConfig: kubeConfigFor(api.url, 'vcuda-control-plane-token'),
        logger: logger.child({ replica: i }),
      });
      refreshBackends();
    };
    const stopReplica = async (i: number) => {
      const r = running[i];
      running[i] = undefined;
      refreshBackends();
      await r?.close();
    };
    const url = `http://127.0.0.1:${httpService.port}`;

    // 4. Nodes: kubelet + node agent each; they verify assignments with the published JWKS.
    let jwksCache: { at: number; jwks: JSONWebKeySet } | undefined;
    const jwks = async (): Promise<JSONWebKeySet> => {
      if (jwksCache && Date.now() - jwksCache.at < 1000) return jwksCache.jwks;
      const list = await client.list(`/api/v1/configmaps?fieldSelector=metadata.name%3D${JWKS_CONFIGMAP_NAME}`);
      const text = (list.items[0]?.['data'] as Record<string, string> | undefined)?.[JWKS_CONFIGMAP_KEY];
      const parsed = text ? (JSON.parse(text) as JSONWebKeySet) : (running.find(Boolean)?.jwks ?? { keys: [] });
      jwksCache = { at: Date.now(), jwks: parsed };
      return parsed;
    };
    const nodes: RunningSimNode[] = [];
    closers.push(async () => {
      for (const n of nodes) await n.close();
    });
    // Nodes boot side by side, as a real cluster's kubelets and DaemonSet pods do.
    const started = await Promise.allSettled(
      expandNodes(cluster).map((node) =>
        startSimNode({
          client,
          apiUrl: api.url,
          agentToken: nodeAgentToken(node.name),
          node,
          root: join(workDir, 'nodes', node.name),
          domain,
          memoryUnitMiB: cluster.memoryUnitMiB,
          nativeBuildDir: NATIVE_BUILD_DIR,
          ...(existsSync(WORKLOAD_DIR) ? { workloadDir: WORKLOAD_DIR } : {}),
          jwks,
          // The Service's URL is known before the replicas start; reports fail (logged) until then.
          usage: { controlPlaneUrl: url, ...(opts.usageReportMs ? { periodMs: opts.usageReportMs } : {}) },
          log,
        }),
      ),
    );
    for (const r of started) if (r.status === 'fulfilled') nodes.push(r.value);
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    opts.onProgress?.(`${nodes.length} node(s): kubelet + node agent`);

    const db = await dbReady;
    for (let i = 0; i < replicaCount; i++) await startReplica(i);
    opts.onProgress?.(`control plane (${replicaCount} replica${replicaCount > 1 ? 's' : ''})`);
    closers.push(async () => {
      for (let i = 0; i < replicaCount; i++) await stopReplica(i);
    });
    const quotas = createQuotaAdmin(db, { clock: () => new Date() });
    for (const [namespace, q] of Object.entries(cluster.quotas)) {
      await quotas.setQuota({
        name: `ns-${namespace}`,
        scope: 'namespace',
        cluster: cluster.name,
        namespace,
        coreLimit: q.core,
        memoryLimitMiB: q.memoryMiB,
      });
    }

    // 5. The scheduler, configured as deploy/ configures kube-scheduler, pointed at the Service's
    // extender port, with its client certificate from the Secret the control plane keeps.
    const tlsDir = await mountExtenderSecret(client, join(workDir, 'scheduler', 'extender-tls'));
    const extenderUrl = `https://127.0.0.1:${extenderService.port}`;
    const schedulerConfig = withResourceDomain(
      await loadSchedulerConfig(SCHEDULER_CONFIG, extenderUrl, { [SCHEDULER_TLS_MOUNT]: tlsDir }),
      domain,
    );
    const scheduler = startScheduler({
      client,
      config: schedulerConfig,
      extraSchedulerNames: ['default-scheduler'],
      // The configuration's podInitialBackoffSeconds / podMaxBackoffSeconds unless a test shortens them.
      ...(opts.schedulerBackoffMs
        ? { initialBackoffMs: opts.schedulerBackoffMs.initial, maxBackoffMs: opts.schedulerBackoffMs.max }
        : {}),
    });
    closers.push(() => scheduler.close());

    return {
      api,
      client,
      url,
      extenderUrl,
      kubeconfigPath,
      workDir,
      cluster,
      db,
      nodes,
      scheduler,
      replicas: () => [...running],
      killReplica: stopReplica,
      startReplica,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
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

/** The bearer token of a node's agent. */
export function nodeAgentToken(node: string): string {
  return `vcuda-node-agent-token-${node}`;
}

const WORK_DIR_PREFIX = 'vcuda-local-';
const OWNER_FILE = 'owner.pid';

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

/**
 * Work directories of local clusters whose process is gone (killed with SIGKILL, so it could not
 * clean up): removed at the next start. A directory without an owner file is left alone.
 */
export function removeAbandonedWorkDirs(parent: string): void {
  for (const entry of readdirSync(parent)) {
    if (!entry.startsWith(WORK_DIR_PREFIX)) continue;
    const dir = join(parent, entry);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, OWNER_FILE), 'utf8'));
    } catch {
      continue; // not ours to judge, or removed meanwhile
    }
    if (Number.isInteger(owner) && owner > 0 && !processExists(owner)) rmSync(dir, { recursive: true, force: true });
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function findCheckoutRoot(simDir: string): string {
  const parent = join(simDir, '..');
  return basename(parent) === 'dist' && existsSync(join(parent, '..', 'native')) ? join(parent, '..') : parent;
}
