/**
 * The node's container runtime process, as containerd is to a kubelet: a small process of its own
 * that forks the containers and reports their pids and exits. The kubelet never forks: in the sim
 * its process also hosts the API server, the control plane and every other node, and a fork copies
 * the page tables of that whole address space (about 10 ms a container, stalling everything else).
 *
 * It starts with the first container and holds the kubelet's event loop only while containers
 * run. It dies with the kubelet (parent-death signal, or its stdin closing), and its containers
 * die with it, so a node's containers still stop with their node.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { PROC_ENTRY_SOURCE, type ProcEntry, removeContainerProc } from './container-cgroup.js';

export type Exit = { exitCode: number; signal: string | null };

export type RuntimeChild = {
  /** Host pid; undefined when the command could not be started. */
  readonly pid: number | undefined;
  readonly exited: Promise<Exit>;
  hasExited(): boolean;
  kill(signal: NodeJS.Signals): void;
};

/**
 * The runtime process itself (plain CommonJS, run with `node -e`, so it needs no build and no
 * loader): one JSON line per request on stdin, one per report on stdout.
 */
const RUNTIME_SOURCE = `
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
${PROC_ENTRY_SOURCE}
const kids = new Map();
const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
function start(m) {
  let fd;
  let child;
  let done = false;
  const exit = (exit, signal) => {
    if (done) return;
    done = true;
    kids.delete(m.id);
    try {
      if (m.proc && child && child.pid) unpublishProc(m.proc, child.pid);
    } catch (e) {
      process.stderr.write('vcuda sim runtime: ' + e.message + '\\n'); // the exit is reported all the same
    }
    send({ id: m.id, exit, signal });
  };
  try {
    fd = fs.openSync(m.log, 'a');
    child = spawn(m.file, m.args, { env: m.env, stdio: ['ignore', fd, fd] });
    kids.set(m.id, child);
    child.on('error', () => exit(127, null));
    child.on('exit', (code, signal) => exit(code ?? 137, signal));
    if (m.proc && child.pid) publishProc(m.proc, child.pid);
    send({ id: m.id, pid: child.pid ?? null });
  } catch (e) {
    // Not started, or started without its cgroup entry (containerd fails such a container too).
    if (fd !== undefined) fs.writeSync(fd, 'vcuda sim runtime: ' + e.message + '\\n');
    child?.kill('SIGKILL');
    send({ id: m.id, pid: null });
    exit(127, null);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
require('node:readline').createInterface({ input: process.stdin })
  .on('line', (line) => {
    const m = JSON.parse(line);
    if (m.op === 'start') start(m);
    else if (m.op === 'kill') kids.get(m.id)?.kill(m.signal);
  })
  .on('close', () => { for (const c of kids.values()) c.kill('SIGKILL'); process.exit(0); });
`;

type Report = { id: number; pid?: number | null; exit?: number; signal?: string | null };

type Entry = {
  started: (pid: number | undefined) => void;
  exited: (e: Exit) => void;
  done: boolean;
  /** The container's cgroup entry, once its pid is known: the runtime removes it when the container exits. */
  proc?: { entry: ProcEntry; pid: number };
};

export class RuntimeProcess {
  private child: ChildProcess | undefined;
  private nextId = 1;
  private readonly entries = new Map<number, Entry>();

  /** `dieWith` prefixes every command (and the runtime's own) so it dies with its parent. */
  constructor(private readonly dieWith: readonly string[]) {}

  /**
   * Starts `file args` with exactly `env`, stdout and stderr appended to `logPath`; with `proc`,
   * the container's cgroup entry exists by the time its pid is reported, until its exit is.
   */
  start(
    file: string,
    args: readonly string[],
    env: Record<string, string>,
    logPath: string,
    proc?: ProcEntry,
  ): Promise<RuntimeChild> {
    const child = this.process();
    const id = this.nextId++;
    let exited: (e: Exit) => void = () => {};
    const exit = new Promise<Exit>((resolve) => {
      exited = resolve;
    });
    return new Promise<RuntimeChild>((resolve) => {
      const entry: Entry = {
        started: (pid) => {
          if (proc && pid !== undefined) entry.proc = { entry: proc, pid };
          resolve({
            pid,
            exited: exit,
            hasExited: () => entry.done,
            kill: (signal) => {
              if (!entry.done) this.send({ op: 'kill', id, signal });
            },
          });
        },
        exited: (e) => {
          entry.done = true;
          this.entries.delete(id);
          this.holdWhileRunning();
          exited(e);
        },
        done: false,
      };
      this.entries.set(id, entry);
      this.holdWhileRunning();
      const [cmd, ...rest] = [...this.dieWith, file, ...args];
      this.send({ op: 'start', id, file: cmd, args: rest, env, log: logPath, ...(proc ? { proc } : {}) }, child);
    });
  }

  /** Ends the runtime: it kills what still runs and exits. */
  async close(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    (child.stdin as Writable).end();
    await gone;
  }

  private send(message: object, child = this.child): void {
    (child?.stdin as Writable | undefined)?.write(`${JSON.stringify(message)}\n`);
  }

  private process(): ChildProcess {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return this.child;
    const [cmd, ...args] = [...this.dieWith, process.execPath, '-e', RUNTIME_SOURCE];
    const child = spawn(cmd!, args, { stdio: ['pipe', 'pipe', 'inherit'], env: {} });
    createInterface({ input: child.stdout as Readable }).on('line', (line) => this.report(line));
    // A runtime that died took its containers with it (parent-death signal): they all exited,
    // and the cgroup entries it had no time to remove go here.
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
      for (const e of [...this.entries.values()]) {
        if (e.proc) removeContainerProc(e.proc.entry.procDir, e.proc.pid);
        e.started(undefined);
        e.exited({ exitCode: 128 + 9, signal: 'SIGKILL' });
      }
    });
    (child.stdin as Writable).on('error', () => {});
    this.child = child;
    return child;
  }

  private report(line: string): void {
    let r: Report;
    try {
      r = JSON.parse(line) as Report;
    } catch {
      return; // not a report: the runtime writes nothing else on stdout
    }
    const entry = this.entries.get(r.id);
    if (!entry) return;
    if (r.pid !== undefined) entry.started(r.pid ?? undefined);
    if (r.exit !== undefined) entry.exited({ exitCode: r.exit, signal: r.signal ?? null });
  }

  /** The runtime keeps the kubelet's process alive only while it has containers, as child processes would. */
  private holdWhileRunning(): void {
    const child = this.child;
    if (!child) return;
    const hold = this.entries.size > 0;
    for (const handle of [child, child.stdin, child.stdout] as unknown as ({ ref(): void; unref(): void } | null)[]) {
      if (hold) handle?.ref();
      else handle?.unref();
    }
  }
}
