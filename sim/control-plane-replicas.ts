/**
 * vcuda's control plane as a Deployment's replicas behind its Service: each replica on its own
 * ports, all sharing one ledger, the Service's three proxies (HTTP, HTTPS, extender) sending to the
 * replicas that run. A replica can be stopped at once, as a crashed pod, and started again.
 */
import type { Logger } from 'pino';
import { loadControlPlaneConfig } from '../control-plane/config.js';
import { type RunningControlPlane, startControlPlane } from '../control-plane/server.js';
import type { VcudaDb } from '../db/connect.js';
import type { ClusterSpec } from './cluster-spec.js';
import { kubeConfigFor } from './kubeconfig.js';
import { findFreePort, type ServiceProxy } from './service-proxy.js';

/** The control plane's Service: one proxy per port it exposes. */
export type ControlPlaneService = { http: ServiceProxy; https: ServiceProxy; extender: ServiceProxy };

export type ReplicaSettings = {
  cluster: ClusterSpec;
  domain: string;
  logLevel: 'silent' | 'error' | 'warn' | 'info' | 'debug';
  /** The dashboard's idle view: allocations idle this long (minutes). */
  idleForMinutes: number;
  /** The ledger every replica shares; it may still be starting. */
  db: Promise<VcudaDb>;
  apiUrl: string;
  logger: Logger;
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

/** `count` replicas, none running yet, each with its ports chosen. */
export async function controlPlaneReplicas(
  count: number,
  service: ControlPlaneService,
  settings: ReplicaSettings,
): Promise<ControlPlaneReplicas> {
  const ports: ReplicaPorts[] = [];
  for (let i = 0; i < count; i++) {
    ports.push({ http: await findFreePort(), https: await findFreePort(), extender: await findFreePort() });
  }
  const running: (RunningControlPlane | undefined)[] = new Array(count).fill(undefined);
  const refreshBackends = () => {
    for (const port of ['http', 'https', 'extender'] as const) {
      service[port].setBackends(ports.filter((_, i) => running[i]).map((p) => p[port]));
    }
  };
  const start = async (i: number) => {
    running[i] = await startReplica(settings, ports[i]!, i);
    refreshBackends();
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

async function startReplica(settings: ReplicaSettings, ports: ReplicaPorts, i: number): Promise<RunningControlPlane> {
  const config = loadControlPlaneConfig({
    flags: {
      port: ports.http,
      host: '127.0.0.1',
      httpsPort: ports.https,
      extender: { port: ports.extender },
      clusterName: settings.cluster.name,
      resourceDomain: settings.domain,
      memoryUnitMiB: settings.cluster.memoryUnitMiB,
      instanceId: `vcuda-control-plane-${i}`,
      kube: { mode: 'kubeconfig' },
      webhookRegistration: 'auto',
      webhook: { schedulerName: 'vcuda-scheduler' },
      dashboard: { idleForMinutes: settings.idleForMinutes },
      logLevel: settings.logLevel,
    },
  });
  return startControlPlane(config, {
    db: await settings.db,
    kubeConfig: kubeConfigFor(settings.apiUrl, 'vcuda-control-plane-token'),
    logger: settings.logger.child({ replica: i }),
  });
}
