/**
 * Test support: a control plane run as a process of its own (control-plane-process.ts), so a test
 * can SIGKILL it and a benchmark can read its event loop apart from its own; for a local cluster,
 * with the cluster's Service sending to it alone.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { BindStep } from '../../../control-plane/extender/binder.js';
import type { LocalCluster } from '../../../sim/local-cluster.js';
import { type LagReport, measureLagOf } from '../lag-probe.js';
import { exitWithin } from '../process.js';
import type { ControlPlaneProcessSettings } from './control-plane-process.js';

const SCRIPT = join(import.meta.dirname, 'control-plane-process.ts');

export type ControlPlaneChild = {
  pid: number;
  /** Its plain, webhook and extender ports. */
  ports: { http: number; https: number; extender: number };
  /** The signal that ended it (SIGKILL when it killed itself at its step), null for an exit. */
  exited: Promise<NodeJS.Signals | null>;
  kill(): void;
  /** Stops it cleanly (SIGTERM), killing it after `deadlineMs`. */
  stop(deadlineMs?: number): Promise<void>;
  /** Starts measuring its event-loop delay; the function returned stops and reads it. */
  measureLag(): () => Promise<LagReport>;
  /** With `pauseAt`: the uid of the pod whose bind holds at that step. */
  paused: Promise<string>;
};

/** Spawns the process and resolves once it serves (within `deadlineMs`, else it is killed and this fails). */
export async function spawnControlPlane(
  settings: ControlPlaneProcessSettings,
  deadlineMs: number,
): Promise<ControlPlaneChild> {
  // A profiled parent (node --cpu-prof …) profiles the control plane too.
  const profiling = process.execArgv.filter((a) => a.startsWith('--cpu-prof'));
  const child = spawn(process.execPath, [...profiling, '--import', 'tsx', SCRIPT, JSON.stringify(settings)], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let out = '';
  let err = '';
  child.stderr?.on('data', (d) => {
    err += d;
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_code, signal) => resolve(signal)),
  );
  let onPaused: (uid: string) => void = () => undefined;
  const paused = new Promise<string>((resolve) => {
    onPaused = resolve;
  });
  // Appends first: the readers registered below read `out` as this left it.
  child.stdout?.on('data', (d) => {
    out += d;
    const m = /paused (\S+)\n/.exec(out);
    if (m) onPaused(m[1] as string);
  });
  const ports = await new Promise<number[]>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`control-plane process not serving after ${deadlineMs} ms: ${err.slice(-2000)}`));
    }, deadlineMs);
    child.stdout?.on('data', () => {
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
  // The IPC channel must not keep the parent alive once it is done with the child.
  child.channel?.unref();
  return {
    pid: child.pid ?? 0,
    ports: { http, https, extender },
    exited,
    kill: () => child.kill('SIGKILL'),
    async stop(deadlineMs = 15_000) {
      child.kill('SIGTERM');
      await exitWithin(child, exited, deadlineMs);
    },
    measureLag: () => measureLagOf(child, exited),
    paused,
  };
}

/**
 * Starts replica `replica` of `lc` as a process on the ledger at `dbUrl` and points the Service at
 * it once it serves. `killAt`: the bind step where it SIGKILLs itself.
 */
export async function startControlPlaneChild(
  lc: LocalCluster,
  opts: { replica: number; dbUrl: string; killAt?: BindStep; deadlineMs: number },
): Promise<ControlPlaneChild> {
  const child = await spawnControlPlane(
    {
      replica: opts.replica,
      config: lc.replicaSettings,
      dbUrl: opts.dbUrl,
      apiUrl: lc.api.url,
      token: lc.apiAccess.controlPlaneToken,
      caPem: lc.apiAccess.caPem,
      ...(opts.killAt ? { killAt: opts.killAt } : {}),
    },
    opts.deadlineMs,
  );
  lc.service.http.setBackends([child.ports.http]);
  lc.service.https.setBackends([child.ports.https]);
  lc.service.extender.setBackends([child.ports.extender]);
  return child;
}
