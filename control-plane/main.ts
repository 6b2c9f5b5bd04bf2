/**
 * The control-plane process: builds the one config from file, environment and flags, starts
 * everything, and stops cleanly on SIGTERM/SIGINT. The only place that reads `process.env`.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { type ControlPlaneConfig, loadControlPlaneConfig, parseConfigFile } from './config.js';
import { tuneHeapForLongLivedConnections } from './heap-tuning.js';
import { startControlPlane } from './server.js';

export type ControlPlaneFlags = {
  config?: string;
  port?: number;
  httpsPort?: number;
  host?: string;
  namespace?: string;
  clusterName?: string;
  resourceDomain?: string;
  memoryUnitMib?: number;
  databaseUrl?: string;
  dataDir?: string;
  kubeMode?: string;
  kubeconfig?: string;
  placement?: string;
  signingKeySource?: string;
  signingKeyFile?: string;
  webhookRegistration?: string;
  webhookUrl?: string;
  webhookSchedulerName?: string;
  webhookPrivilegedUsername?: string[];
  logLevel?: string;
};

/** Flags as a partial config: only what was given, so env and file fill the rest. */
export function flagsToConfig(f: ControlPlaneFlags): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const put = (path: string[], v: unknown) => {
    if (v === undefined) return;
    let cur = out;
    for (const k of path.slice(0, -1)) {
      cur[k] = cur[k] ?? {};
      cur = cur[k] as Record<string, unknown>;
    }
    cur[path[path.length - 1] as string] = v;
  };
  put(['port'], f.port);
  put(['httpsPort'], f.httpsPort);
  put(['host'], f.host);
  put(['namespace'], f.namespace);
  put(['clusterName'], f.clusterName);
  put(['resourceDomain'], f.resourceDomain);
  put(['memoryUnitMiB'], f.memoryUnitMib);
  put(['database', 'url'], f.databaseUrl);
  put(['database', 'dataDir'], f.dataDir);
  put(['kube', 'mode'], f.kubeMode);
  put(['kube', 'kubeconfig'], f.kubeconfig);
  put(['placement', 'default'], f.placement);
  put(['signingKeys', 'source'], f.signingKeySource);
  put(['signingKeys', 'file'], f.signingKeyFile);
  put(['webhookRegistration'], f.webhookRegistration);
  put(['webhook', 'registration', 'url'], f.webhookUrl);
  put(['webhook', 'schedulerName'], f.webhookSchedulerName);
  put(['webhook', 'privilegedUsernames'], f.webhookPrivilegedUsername);
  put(['logLevel'], f.logLevel);
  return out;
}

export function buildConfig(flags: ControlPlaneFlags, env: NodeJS.ProcessEnv): ControlPlaneConfig {
  const path = flags.config ?? env.VCUDA_CONFIG;
  const file = path ? parseConfigFile(readFileSync(path, 'utf8'), path) : {};
  // In a cluster the pod name tells replicas apart in Events.
  const withInstance = { VCUDA_INSTANCE_ID: env.POD_NAME ?? hostname(), ...env };
  return loadControlPlaneConfig({ file, env: withInstance, flags: flagsToConfig(flags) });
}

/** Runs until SIGTERM/SIGINT. */
export async function runControlPlane(flags: ControlPlaneFlags): Promise<void> {
  const config = buildConfig(flags, process.env);
  tuneHeapForLongLivedConnections();
  const running = await startControlPlane(config);
  const stop = () => {
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
