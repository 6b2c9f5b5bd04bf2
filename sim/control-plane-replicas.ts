/**
 * vcuda's control plane as a Deployment's replicas behind its Service: each replica on ports it
 * binds itself (any free ones, so no port is picked and then lost to another process), all
 * sharing one ledger, the Service's three proxies (HTTP, HTTPS, extender) sending to the
 * replicas that run. A replica can be stopped at once, as a crashed pod, and started again.
 */
import type { Logger } from 'pino';
import { type ControlPlaneConfig, loadControlPlaneConfig } from '../control-plane/config.js';
import type { BindFaults } from '../control-plane/extender/binder.js';
import { type RunningControlPlane, startControlPlane } from '../control-plane/server.js';
import type { VcudaDb } from '../db/connect.js';
import type { ClusterSpec } from './cluster-spec.js';
import { kubeConfigFor } from './kubeconfig.js';
import type { ServiceProxy } from './service-proxy.js';

/** The control plane's Service: one proxy per port it exposes. */
export type ControlPlaneService = { http: ServiceProxy; https: ServiceProxy; extender: ServiceProxy };

export type ReplicaSettings = {
  cluster: ClusterSpec;
  domain: string;
  logLevel: 'silent' | 'error' | 'warn' | 'info' | 'debug';
  /** The dashboard's idle view: allocations idle this long (minutes). */
  idleForMinutes: number;
  /** A node agent silent for longer is offered no pods and shown not reporting; default the control plane's (60). */
  heartbeatStaleSeconds?: number;
  /** The ledger every replica shares; it may still be starting. */
  db: Promise<VcudaDb>;
  apiUrl: string;
  /** The control plane's token at the API server, and the CA of its certificate. */
  apiCredentials?: { token: string; caPem?: string };
  logger: Logger;
  /** Fault injection for tests: replica `i`'s hook at each step of its binds. */
  bindFaults?: (replica: number) => BindFaults | undefined;
  /** The token the API server presents to the webhooks, in a file as a Secret would mount it. */
  webhookCallerTokenFile?: string;
  /**
   * A DRA cluster, as the DRA overlay configures the control plane: the claim hooks (admission and
   * the ledger's charge) registered, and pods written for vcuda turned into claims.
   */
  dra?: boolean;
};

export type ControlPlaneReplicas = {
  /** Replica `i`, or undefined while it is stopped. */
  list(): (RunningControlPlane | undefined)[];
  start(i: number): Promise<void>;
  /** Stops replica `i` at once (its in-flight requests fail). */
  stop(i: number): Promise<void>;
  startAll(): Promise<void>;
  stopAll(): Promise<void>;
};

type ReplicaPorts = { http: number; https: number; extender: number };

const portOf = (url: string | undefined): number => Number(url ? new URL(url).port : 0);

/** The ports a started replica bound (it asks for any free ones). */
function portsOf(cp: RunningControlPlane): ReplicaPorts {
  return { http: portOf(cp.url), https: portOf(cp.httpsUrl), extender: portOf(cp.extenderUrl) };
}

/** How long a started replica may take to turn ready before the Service sends to it anyway. */
const READY_DEADLINE_MS = 30_000;

/** Resolves once the replica's /readyz answers 200 (or the deadline passed, which is logged). */
async function untilReady(replica: RunningControlPlane, logger: Logger): Promise<void> {
  const deadline = performance.now() + READY_DEADLINE_MS;
  let last = '';
  while (performance.now() < deadline) {
    try {
      const res = await fetch(`${replica.url}/readyz`, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return;
      last = await res.text();
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  logger.warn(`control-plane replica not ready after ${READY_DEADLINE_MS} ms (${last}); serving it anyway`);
}

/** `count` replicas, none running yet. */
export async function controlPlaneReplicas(
  count: number,
  service: ControlPlaneService,
  settings: ReplicaSettings,
): Promise<ControlPlaneReplicas> {
  const running: (RunningControlPlane | undefined)[] = new Array(count).fill(undefined);
  const refreshBackends = () => {
    const live = running.filter((r): r is RunningControlPlane => r !== undefined).map(portsOf);
    for (const port of ['http', 'https', 'extender'] as const) {
      service[port].setBackends(live.map((p) => p[port]).filter((p) => p > 0));
    }
  };
  const start = async (i: number) => {
    const replica = await startReplica(settings, i);
    running[i] = replica;
    // As a Service sends only to ready endpoints: a replica whose watch cache or ledger is not
    // there yet would fail every call it got.
    await untilReady(replica, settings.logger);
    if (running[i] === replica) refreshBackends();
  };
  const stop = async (i: number) => {
    const r = running[i];
    running[i] = undefined;
    refreshBackends();
    await r?.close();
  };
  return {
    list: () => [...running],
    start,
    stop,
    startAll: async () => {
      for (let i = 0; i < count; i++) await start(i);
    },
    stopAll: async () => {
      for (let i = 0; i < count; i++) await stop(i);
    },
  };
}

/** What a replica's configuration is made of: the settings that are plain data. */
export type ReplicaConfigSettings = Pick<
  ReplicaSettings,
  'cluster' | 'domain' | 'logLevel' | 'idleForMinutes' | 'heartbeatStaleSeconds' | 'webhookCallerTokenFile' | 'dra'
>;

/** Replica `i`'s configuration, as its Deployment gives it (also to a replica run as a process of its own). */
export function replicaConfig(settings: ReplicaConfigSettings, i: number): ControlPlaneConfig {
  return loadControlPlaneConfig({
    flags: {
      port: 0,
      host: '127.0.0.1',
      extender: { port: 0 },
      clusterName: settings.cluster.name,
      resourceDomain: settings.domain,
      memoryUnitMiB: settings.cluster.memoryUnitMiB,
      instanceId: `vcuda-control-plane-${i}`,
      kube: { mode: 'kubeconfig' },
      webhookRegistration: 'auto',
      webhook: {
        schedulerName: 'vcuda-scheduler',
        ...(settings.webhookCallerTokenFile ? { callers: { tokenFile: settings.webhookCallerTokenFile } } : {}),
        ...(settings.dra ? { claims: { register: true }, dra: { convertPods: true } } : {}),
      },
      dashboard: { idleForMinutes: settings.idleForMinutes },
      ...(settings.heartbeatStaleSeconds ? { heartbeatStaleSeconds: settings.heartbeatStaleSeconds } : {}),
      logLevel: settings.logLevel,
    },
  });
}

async function startReplica(settings: ReplicaSettings, i: number): Promise<RunningControlPlane> {
  return startControlPlane(replicaConfig(settings, i), {
    db: await settings.db,
    kubeConfig: kubeConfigFor(settings.apiUrl, settings.apiCredentials?.token, settings.apiCredentials?.caPem),
    logger: settings.logger.child({ replica: i }),
    httpsPort: 0,
    bindFaults: settings.bindFaults?.(i),
  });
}
