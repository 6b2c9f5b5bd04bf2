/**
 * A simulated node in a process of its own, as a real node's kubelet and node-agent pod are
 * processes apart from the API server, the scheduler and the control plane: the node's work
 * (device plugin, PodResources, limit files, NVML sampling, container starts) runs beside the
 * rest of the cluster instead of on its event loop, and nothing but the wire connects them.
 *
 * The parent forks `node-process-main` and talks to it over the IPC channel: one `start` with
 * the node's description (validated again in the child: it is a process boundary), then
 * `restartAgent` / `stopAgent` / `close` requests, each answered once and each under a deadline.
 * The child exits when the channel closes, so a node never outlives its cluster, even after
 * `kill -9` of the parent.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { clusterSpecSchema } from '../cluster-spec.js';

export const nodeProcessSpecSchema = z.object({
  cluster: clusterSpecSchema,
  nodeName: z.string().min(1),
  root: z.string().min(1),
  apiUrl: z.url(),
  agentToken: z.string().min(1).optional(),
  /** The kubelet's own token, and the CA of the API server's certificate (HTTPS). */
  kubeletToken: z.string().min(1).optional(),
  apiCaPem: z.string().min(1).optional(),
  domain: z.string().min(1),
  nativeBuildDir: z.string().min(1),
  workloadDir: z.string().min(1).optional(),
  usage: z.object({ controlPlaneUrl: z.url(), periodMs: z.number().int().positive().optional() }).optional(),
  heartbeatPeriodMs: z.number().int().positive().optional(),
  /** How the node agent offers the cards: device plugins (default) or as a DRA driver (a 1.36 cluster). */
  agentMode: z.enum(['device-plugin', 'dra']).optional(),
  logLevel: z.enum(['silent', 'error', 'warn', 'info', 'debug']),
});
export type NodeProcessSpec = z.infer<typeof nodeProcessSpecSchema>;

export type NodeRequest = { op: 'restartAgent' | 'stopAgent'; id: number };
export type ParentMessage = { op: 'start'; spec: NodeProcessSpec } | NodeRequest | { op: 'close' };
export type ChildMessage =
  | { op: 'ready' }
  | { op: 'failed'; message: string }
  | { op: 'done'; id: number; error?: string };

export type NodeProcess = {
  readonly name: string;
  readonly pid: number;
  /** Stops the node agent and starts a fresh one in the same process (same kubelet). */
  restartAgent(): Promise<void>;
  stopAgent(): Promise<void>;
  /** Closes the node (agent, kubelet, containers) and waits for its process to exit. */
  close(): Promise<void>;
};

const START_DEADLINE_MS = 60_000;
const REQUEST_DEADLINE_MS = 30_000;
const CLOSE_DEADLINE_MS = 15_000;

/** The child's entry: the TypeScript source through tsx in a checkout, the compiled file in dist/. */
function childEntry(): { file: string; execArgv: string[] } {
  const ts = fileURLToPath(new URL('./node-process-main.ts', import.meta.url));
  if (existsSync(ts)) return { file: ts, execArgv: ['--import', 'tsx'] };
  return { file: fileURLToPath(new URL('./node-process-main.js', import.meta.url)), execArgv: [] };
}

export async function startNodeProcess(spec: NodeProcessSpec): Promise<NodeProcess> {
  const entry = childEntry();
  // A profiled parent (node --cpu-prof …) profiles its nodes too: each writes its own profile.
  const execArgv = [...entry.execArgv, ...process.execArgv.filter((a) => a.startsWith('--cpu-prof'))];
  const child = fork(entry.file, [], {
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'json',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await startChild(child, spec);
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    throw err;
  }
  return nodeProcessHandle(spec.nodeName, child, exited);
}

function startChild(child: ChildProcess, spec: NodeProcessSpec): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const fail = (why: string) => {
      cleanup();
      reject(new Error(`node ${spec.nodeName}: ${why}`));
    };
    const onMessage = (m: ChildMessage) => {
      if (m.op === 'ready') {
        cleanup();
        resolve();
      } else if (m.op === 'failed') fail(`did not start: ${m.message}`);
    };
    const onExit = (code: number | null, signal: string | null) =>
      fail(`process exited while starting (${signal ?? `code ${code}`})`);
    const onError = (err: Error) => fail(`process failed: ${err.message}`);
    const timer = setTimeout(() => fail(`not ready within ${START_DEADLINE_MS / 1000} s`), START_DEADLINE_MS);
    const cleanup = () => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      child.off('error', onError);
    };
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.once('error', onError);
    child.send({ op: 'start', spec } satisfies ParentMessage);
  });
}

function nodeProcessHandle(name: string, child: ChildProcess, exited: Promise<void>): NodeProcess {
  let nextId = 1;
  const pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  let gone = false;
  child.on('message', (m: ChildMessage) => {
    if (m.op !== 'done') return;
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) p?.reject(new Error(`node ${name}: ${m.error}`));
    else p?.resolve();
  });
  void exited.then(() => {
    gone = true;
    for (const p of pending.values()) p.reject(new Error(`node ${name}: process exited`));
    pending.clear();
  });

  const request = (op: NodeRequest['op']) =>
    new Promise<void>((resolve, reject) => {
      if (gone) return reject(new Error(`node ${name}: process exited`));
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`node ${name}: ${op} not done within ${REQUEST_DEADLINE_MS / 1000} s`));
      }, REQUEST_DEADLINE_MS);
      pending.set(id, {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      child.send({ op, id } satisfies ParentMessage);
    });

  return {
    name,
    pid: child.pid ?? -1,
    restartAgent: () => request('restartAgent'),
    stopAgent: () => request('stopAgent'),
    close: async () => {
      if (gone) return;
      child.send({ op: 'close' } satisfies ParentMessage);
      const timer = setTimeout(() => child.kill('SIGKILL'), CLOSE_DEADLINE_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}
