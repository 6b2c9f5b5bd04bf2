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
