/**
 * The real-server tier: an unmodified kube-apiserver and kube-scheduler v1.32
 * (`../shared/kubernetes-1.32/`, started once per test file) with vcuda's real control plane and
 * node agents and the simulated kubelets. kube-scheduler runs the shipped configuration with the
 * extender URL rewritten (leader election off, this cluster's kubeconfig).
 *
 * What does not run (see that directory's README): no kubelet (the simulated ones stand in), no
 * controller-manager (nodes lose the not-ready taint here), and no admission webhooks (the API
 * server cannot reach a Service without a network; pods name `vcuda-scheduler` themselves).
 * The simulated components speak plain HTTP to a local front that forwards to the API server with
 * the admin client certificate, as `kubectl proxy` does.
 */

import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { resourceNames } from '../../contract/index.js';
import { type ControlPlaneConfigInput, loadControlPlaneConfig } from '../../control-plane/config.js';
import type { BindFaults, BindStep } from '../../control-plane/extender/binder.js';
import { type RunningControlPlane, startControlPlane } from '../../control-plane/server.js';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { PooledKubeConfig } from '../../kube-connections/pooled-kube-config.js';
import { type ClusterSpec, expandNodes } from '../../sim/cluster-spec.js';
import { KubeClient } from '../../sim/kube-client.js';
import { mountExtenderSecret, NATIVE_BUILD_DIR, WORKLOAD_DIR } from '../../sim/local-cluster.js';
import { type LocalNode, startLocalNode } from '../../sim/node/local-node.js';
import { publishedJwks } from '../../sim/node/published-jwks.js';
import { workDirParent } from '../../sim/work-dir.js';
import { startAdminFront } from '../support/admin-front.js';
import { type ControlPlaneChild, spawnControlPlane } from '../support/control-plane/control-plane-child.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const REAL_K8S_DIR = join(repoRoot, '..', 'shared', 'kubernetes-1.32');
const CLUSTER_SH = join(REAL_K8S_DIR, 'cluster.sh');
const SCHEDULER_CONFIG = join(repoRoot, 'deploy', 'scheduler', 'kube-scheduler-config.yaml');

/** Why the real tier cannot run here, or undefined when it can. */
export function realTierSkipReason(): string | undefined {
  if (!existsSync(CLUSTER_SH)) return `no ${REAL_K8S_DIR} (real kube-apiserver + kube-scheduler v1.32)`;
  return undefined;
}

/**
 * How kube-scheduler reaches the extender: the one place to change when the control plane's
 * extender listener moves (another port, TLS with a client certificate).
 */
export type ExtenderEndpoint = {
  urlPrefix: string;
  enableHTTPS: boolean;
  tlsConfig: { certFile: string; keyFile: string; caFile: string; serverName: string };
};

/**
 * The extender as kube-scheduler reaches it: its TLS port, with the client certificate the control
 * plane keeps in Secret vcuda-extender-tls (written to `tlsDir` as the Secret volume would be), and
 * the Service's name as the server name its certificate carries.
 */
export function extenderEndpoint(port: number, tlsDir: string): ExtenderEndpoint {
  return {
    urlPrefix: `https://127.0.0.1:${port}/scheduler`,
    enableHTTPS: true,
    tlsConfig: {
      certFile: join(tlsDir, 'tls.crt'),
      keyFile: join(tlsDir, 'tls.key'),
      caFile: join(tlsDir, 'ca.crt'),
      serverName: 'vcuda-control-plane.vcuda-system.svc',
    },
  };
}

/** The shipped scheduler configuration for this cluster: extender rewritten, no leader election. */
export function schedulerConfigFor(dir: string, extender: ExtenderEndpoint): string {
  const doc = parseYaml(readFileSync(SCHEDULER_CONFIG, 'utf8')) as {
    leaderElection?: unknown;
    clientConnection?: unknown;
    extenders: { urlPrefix: string; enableHTTPS?: boolean; tlsConfig?: unknown }[];
  };
  doc.leaderElection = { leaderElect: false };
  doc.clientConnection = { kubeconfig: join(dir, 'scheduler.kubeconfig') };
  for (const e of doc.extenders) Object.assign(e, extender);
  const file = join(dir, 'kube-scheduler-config.yaml');
  writeFileSync(file, stringifyYaml(doc));
  return file;
}

export type RealCluster = {
  /** Admin access over plain HTTP (the front), as the simulated components use it. */
  readonly client: KubeClient;
  readonly db: VcudaDb;
  readonly nodes: LocalNode[];
  readonly nodeNames: string[];
  readonly dir: string;
  /** The control plane in this process; undefined while it is down or runs as a process of its own. */
  controlPlane(): RunningControlPlane | undefined;
  /** The control plane's own process, with `controlPlaneProcess`. */
  controlPlaneProcess(): ControlPlaneChild | undefined;
  killControlPlane(): Promise<void>;
  /** `pauseAt` (with `controlPlaneProcess`): the first bind to reach that step holds there (see `controlPlaneProcess().paused`). */
  startControlPlane(opts?: { pauseAt?: BindStep }): Promise<void>;
  close(): Promise<void>;
};

const run = promisify(execFile);

async function removeNotReadyTaint(client: KubeClient, name: string): Promise<void> {
  const node = await client.get(`/api/v1/nodes/${name}`);
  const taints = ((node['spec'] as { taints?: { key: string }[] } | undefined)?.taints ?? []).filter(
    (t) => t.key !== 'node.kubernetes.io/not-ready',
  );
  await client.mergePatch(`/api/v1/nodes/${name}`, { spec: { taints } });
}

export type RealClusterOptions = {
  /** postgres://… for the ledger; absent = embedded PGlite in memory. */
  databaseUrl?: string;
  /** Each node (simulated kubelet + node agent) in a process of its own, as `LocalClusterOptions`. */
  nodeProcesses?: boolean;
  /** Fault injection: the control plane's hook at each step of its binds, at every start. */
  bindFaults?: BindFaults;
  /**
   * The control plane in a process of its own, as in a cluster, so what it does is told apart
   * from the test's own work (its event loop, its CPU). Needs `databaseUrl`; no `bindFaults`.
   */
  controlPlaneProcess?: boolean;
};

/** Starts etcd, kube-apiserver, the control plane, the nodes and kube-scheduler; ~15 s. */
export async function startRealCluster(spec: ClusterSpec, opts: RealClusterOptions = {}): Promise<RealCluster> {
  // etcd and the API server keep their state on disk, as they do in a cluster; the simulated
  // nodes' state (their /run, /proc) goes where the simulator keeps it, on tmpfs when there is one.
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-k8s-'));
  const nodesDir = mkdtempSync(join(workDirParent(), 'vcuda-k8s-nodes-'));
  const logger = pino({ level: (process.env['VCUDA_TEST_LOG_LEVEL'] as 'info' | undefined) ?? 'silent' });
  const log = logger;
  const closers: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    closers.length = 0;
    rmSync(dir, { recursive: true, force: true });
    rmSync(nodesDir, { recursive: true, force: true });
  };
  try {
    closers.push(() => run(CLUSTER_SH, ['stop', dir]));
    const started = await run(CLUSTER_SH, ['start', dir], { timeout: 120_000 });
    const apiserver = /APISERVER=(\S+)/.exec(started.stdout)?.[1];
    if (!apiserver) throw new Error(`cluster.sh start printed no APISERVER=: ${started.stdout}`);
    const front = await startAdminFront(dir, apiserver);
    closers.push(front.close);
    const client = new KubeClient(front.url);
    for (const ns of ['vcuda-system']) await client.create('/api/v1/namespaces', { metadata: { name: ns } });

    const db = await connectDb(opts.databaseUrl ? { url: opts.databaseUrl } : {});
    closers.push(() => closeDb(db));
    await migrate(db);
    const kc = new PooledKubeConfig();
    kc.loadFromFile(join(dir, 'admin.kubeconfig'));
    // Plain, webhook and extender ports: any free ones, bound by the first start and kept across
    // restarts (the scheduler is pointed at the extender's).
    let port = 0;
    let extenderPort = 0;
    let webhookPort = 0;
    // The webhooks are registered by URL, so the real kube-apiserver admits every pod through them
    // (over HTTP/2, as its Go client negotiates). The admin's certificate is what the control
    // plane, the agents and the tests all use here, so it may write vcuda.io/ annotations. The URL
    // says port 0: the control plane registers the port its listener bound.
    let cp: RunningControlPlane | undefined;
    let cpProcess: ControlPlaneChild | undefined;
    const startCp = async (startOpts: { pauseAt?: BindStep } = {}) => {
      const flags = {
        port,
        host: '127.0.0.1',
        clusterName: spec.name,
        memoryUnitMiB: spec.memoryUnitMiB,
        instanceId: 'vcuda-control-plane-0',
        kube: { mode: 'kubeconfig' },
        webhookRegistration: 'auto',
        webhook: {
          schedulerName: 'vcuda-scheduler',
          privilegedUsernames: ['admin'],
          registration: { url: 'https://127.0.0.1:0' },
        },
        extender: { port: extenderPort },
        logLevel: logger.level as 'silent',
      } satisfies ControlPlaneConfigInput;
      if (opts.controlPlaneProcess) {
        cpProcess = await startProcess(flags, startOpts.pauseAt);
        ({ http: port, extender: extenderPort, https: webhookPort } = cpProcess.ports);
        return;
      }
      cp = await startControlPlane(loadControlPlaneConfig({ flags }), {
        db,
        kubeConfig: kc,
        logger: logger.child({ cp: 0 }),
        httpsPort: webhookPort,
        ...(opts.bindFaults ? { bindFaults: opts.bindFaults } : {}),
      });
      port = Number(new URL(cp.url).port);
      extenderPort = Number(new URL(cp.extenderUrl).port);
      webhookPort = Number(new URL(cp.httpsUrl ?? 'https://127.0.0.1:0').port);
    };
    const startProcess = (flags: ControlPlaneConfigInput, pauseAt: BindStep | undefined) => {
      if (!opts.databaseUrl) throw new Error('startRealCluster: controlPlaneProcess needs databaseUrl');
      const kubeconfigPath = join(dir, 'admin.kubeconfig');
      const settings = { flags, kubeconfigPath, httpsPort: webhookPort, dbUrl: opts.databaseUrl };
      return spawnControlPlane({ ...settings, ...(pauseAt ? { pauseAt } : {}) }, 60_000);
    };
    const killCp = async () => {
      const c = cp;
      cp = undefined;
      await c?.close();
      const child = cpProcess;
      cpProcess = undefined;
      child?.kill();
      await child?.exited;
    };
    await startCp();
    closers.push(async () => {
      await cpProcess?.stop();
      await killCp();
    });

    // The agents read the ConfigMap as a mounted file would show it.
    const jwks = publishedJwks(client);
    const nodes: LocalNode[] = [];
    closers.push(async () => {
      for (const n of nodes) await n.close();
    });
    for (const node of expandNodes(spec)) {
      const description = {
        cluster: spec,
        nodeName: node.name,
        root: join(nodesDir, node.name),
        apiUrl: front.url,
        domain: resourceNames().domain,
        nativeBuildDir: NATIVE_BUILD_DIR,
        ...(existsSync(WORKLOAD_DIR) ? { workloadDir: WORKLOAD_DIR } : {}),
        logLevel: logger.level as 'silent',
      };
      nodes.push(await startLocalNode(description, opts.nodeProcesses ? undefined : { client, jwks, log }));
      await removeNotReadyTaint(client, node.name);
    }
    const tlsDir = await mountExtenderSecret(client, join(dir, 'scheduler-tls'));
    const schedulerConfig = schedulerConfigFor(dir, extenderEndpoint(extenderPort, tlsDir));
    await run(CLUSTER_SH, ['start', dir, '--scheduler-config', schedulerConfig], { timeout: 60_000 });
    return {
      client,
      db,
      nodes,
      nodeNames: nodes.map((n) => n.name),
      dir,
      controlPlane: () => cp,
      controlPlaneProcess: () => cpProcess,
      killControlPlane: killCp,
      startControlPlane: startCp,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
