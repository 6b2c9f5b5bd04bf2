import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Test support: whether a process still exists (signal 0 probes without touching it). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits for a process asked to stop to exit (`exited`), killing it after `deadlineMs`. */
export async function exitWithin(child: ChildProcess, exited: Promise<unknown>, deadlineMs: number): Promise<void> {
  const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs);
  await exited;
  clearTimeout(timer);
}

/** One process as /proc/PID/stat shows it: parent, command name, CPU jiffies (user + system). */
export type ProcStat = { pid: number; ppid: number; comm: string; jiffies: number };

/** Every process's /proc/PID/stat (those that exit meanwhile are left out). */
export function procStats(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.push({ pid: Number(pid), ppid: Number(fields[1]), comm, jiffies: Number(fields[11]) + Number(fields[12]) });
  }
  return out;
}

/** Every process below `pid` (what a process manager would have to clean up), from `stats`. */
export function descendantsOf(pid: number, stats: readonly ProcStat[] = procStats()): number[] {
  const children = new Map<number, number[]>();
  for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s.pid]);
  const found: number[] = [];
  const walk = (p: number) => {
    for (const child of children.get(p) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

/**
 * Test support: runs `tsx <script> '<settings JSON>'` from `cwd` with `env` added, to its end or a
 * kill (its signal then says which); a process still running after `deadlineMs` is killed and fails.
 */
export function runTsxProcess(
  script: string,
  settings: object,
  opts: { cwd: string; env: Record<string, string>; deadlineMs: number },
): Promise<{ signal: NodeJS.Signals | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(settings)], {
      cwd: opts.cwd,
      env: { ...process.env, ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} still running after ${opts.deadlineMs} ms`));
    }, opts.deadlineMs);
    child.once('exit', (_code, signal) => {
      clearTimeout(timer);
      resolve({ signal, out, err });
    });
  });
}
