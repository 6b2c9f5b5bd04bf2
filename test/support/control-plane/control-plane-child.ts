/**
 * Test support: a local cluster's control plane run as a process of its own
 * (control-plane-process.ts), the cluster's Service sending to it alone, so a test can SIGKILL it.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { BindStep } from '../../../control-plane/extender/binder.js';
import type { LocalCluster } from '../../../sim/local-cluster.js';
import type { ControlPlaneProcessSettings } from './control-plane-process.js';

const SCRIPT = join(import.meta.dirname, 'control-plane-process.ts');

export type ControlPlaneChild = {
  pid: number;
  /** The signal that ended it (SIGKILL when it killed itself at its step), null for an exit. */
  exited: Promise<NodeJS.Signals | null>;
  kill(): void;
};

/**
 * Starts replica `replica` of `lc` as a process on the ledger at `dbUrl` and points the Service at
 * it once it serves (within `deadlineMs`, else it is killed and this fails). `killAt`: the bind step
 * where it SIGKILLs itself.
 */
export async function startControlPlaneChild(
  lc: LocalCluster,
  opts: { replica: number; dbUrl: string; killAt?: BindStep; deadlineMs: number },
): Promise<ControlPlaneChild> {
  const settings: ControlPlaneProcessSettings = {
    replica: opts.replica,
    config: lc.replicaSettings,
    dbUrl: opts.dbUrl,
    apiUrl: lc.api.url,
    token: lc.apiAccess.controlPlaneToken,
    caPem: lc.apiAccess.caPem,
    ...(opts.killAt ? { killAt: opts.killAt } : {}),
  };
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, JSON.stringify(settings)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_code, signal) => resolve(signal)),
  );
  const ports = await new Promise<number[]>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`control-plane process not serving after ${opts.deadlineMs} ms: ${err.slice(-2000)}`));
    }, opts.deadlineMs);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /ready (\d+) (\d+) (\d+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      resolve([Number(m[1]), Number(m[2]), Number(m[3])]);
    });
    void exited.then((signal) => {
      clearTimeout(timer);
      reject(new Error(`control-plane process ended (${signal ?? 'exit'}) before serving: ${err.slice(-2000)}`));
    });
  });
  const [http = 0, https = 0, extender = 0] = ports;
  lc.service.http.setBackends([http]);
  lc.service.https.setBackends([https]);
  lc.service.extender.setBackends([extender]);
  return { pid: child.pid ?? 0, exited, kill: () => child.kill('SIGKILL') };
}
