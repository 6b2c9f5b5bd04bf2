/**
 * Publishes each GPU container's host pids into its region's host-pid map
 * (contract/region-layout.ts `regionPidMap`), so libvcuda can filter NVML's process lists, which
 * name host pids, inside a container that has its own pid namespace. Each entry carries the pid
 * the container knows the process by (the last `NSpid` field of `/proc/PID/status`) and its start
 * time (`/proc/PID/stat` field 22), which libvcuda checks against its own `/proc` before it shows
 * a row, so a pid reused since the last publication is never shown.
 *
 * Every period one scan of `/proc` finds the processes of pods that hold GPU containers (the
 * cgroup names the pod), maps each to its container with the same mapping the compute sampler
 * uses, and writes every container's map under its seqlock: seq odd, header and entries, seq
 * even. One writer per region (this publisher), so the seq needs no compare-and-swap.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REGION_FILE_SIZE, regionPidMap } from '../../contract/region-layout.js';
import { parseProcCgroup } from './cgroup-identity.js';
import { periodicTask } from './periodic-task.js';
import { createRegionHandles } from './region-handles.js';
import { publishSeqlocked, type RegionAccess, withRegion } from './region-seqlock.js';

/** How often the maps are rewritten; libvcuda trusts a map for `HOST_PID_VALID_PERIODS` periods. */
export const HOST_PID_PERIOD_MS = 1000;
export const HOST_PID_VALID_PERIODS = 3;

export type HostPidEntry = {
  hostPid: number;
  /** The pid inside the container's pid namespace; 0 when unknown. */
  containerPid: number;
  /** Clock ticks since boot at process start; 0n when unknown. */
  startTicks: bigint;
};

export type HostPidMap = { entries: HostPidEntry[] };

/** The pids of `NSpid:` in `/proc/PID/status`, outermost first; null when the line is missing. */
export function parseNsPids(statusText: string): number[] | null {
  const line = statusText.split('\n').find((l) => l.startsWith('NSpid:'));
  if (!line) return null;
  const pids = line
    .slice('NSpid:'.length)
    .trim()
    .split(/\s+/)
    .map((f) => Number(f));
  return pids.length > 0 && pids.every((p) => Number.isInteger(p) && p > 0) ? pids : null;
}

/** Field 22 (start time, clock ticks) of `/proc/PID/stat`; the name in field 2 may hold spaces. */
export function parseStartTicks(statText: string): bigint | null {
  const close = statText.lastIndexOf(')');
  if (close < 0) return null;
  const fields = statText
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  // fields[0] is field 3 (state), so field 22 is fields[19].
  const raw = fields[19];
  return raw !== undefined && /^\d+$/.test(raw) ? BigInt(raw) : null;
}

/** One process's entry from its status and stat texts (either may be missing). */
export function hostPidEntry(hostPid: number, statusText?: string, statText?: string): HostPidEntry {
  const ns = statusText === undefined ? null : parseNsPids(statusText);
  const start = statText === undefined ? null : parseStartTicks(statText);
  return { hostPid, containerPid: ns ? (ns[ns.length - 1] as number) : 0, startTicks: start ?? 0n };
}

/** Bytes 8..end of the map (everything but seq), sorted by host pid and capped at the capacity. */
export function encodeHostPidMap(map: HostPidMap, publishedAtMs: number, validForMs: number): Buffer {
  const sorted = [...map.entries].sort((a, b) => a.hostPid - b.hostPid);
  const kept = sorted.slice(0, regionPidMap.capacity);
  const h = regionPidMap.header;
  const buf = Buffer.alloc(regionPidMap.headerSize - 8 + regionPidMap.entrySize * kept.length);
  let flags = 0;
  // Another numbering than the host's: libvcuda must not compare its own pids with NVML's.
  if (kept.some((e) => e.containerPid !== 0 && e.containerPid !== e.hostPid))
    flags |= regionPidMap.flags.ownPidNamespace;
  if (sorted.length > kept.length) flags |= regionPidMap.flags.truncated;
  buf.writeUInt32LE(regionPidMap.version, h.version - 8);
  buf.writeUInt32LE(regionPidMap.entrySize, h.entrySize - 8);
  buf.writeBigUInt64LE(BigInt(Math.max(0, Math.floor(publishedAtMs))), h.publishedAtMs - 8);
  buf.writeUInt32LE(Math.max(0, Math.min(0xffff_ffff, Math.round(validForMs))), h.validForMs - 8);
  buf.writeUInt32LE(kept.length, h.count - 8);
  buf.writeUInt32LE(flags, h.flags - 8);
  kept.forEach((e, j) => {
    const at = regionPidMap.headerSize - 8 + regionPidMap.entrySize * j;
    buf.writeUInt32LE(e.hostPid >>> 0, at + regionPidMap.entry.hostPid);
    buf.writeUInt32LE(e.containerPid >>> 0, at + regionPidMap.entry.containerPid);
    buf.writeBigUInt64LE(e.startTicks, at + regionPidMap.entry.startTicks);
  });
  return buf;
}

/** Publishes one map into an open region file; returns the new (even) seq. */
export function writeHostPidMapFd(fd: number, map: HostPidMap, publishedAtMs: number, validForMs: number): bigint {
  const seqAt = regionPidMap.offset + regionPidMap.header.seq;
  const payload = encodeHostPidMap(map, publishedAtMs, validForMs);
  return publishSeqlocked(fd, seqAt, seqAt + 8, payload, 'host-pid map');
}

/**
 * Publishes `map` into the region at `path`. False when there is nothing to publish into: no
 * region yet, not a region, or a region no libvcuda with the map has sized (no process of the
 * container started, or an older library that would not read it; the file is not grown here).
 */
export function writeHostPidMap(
  path: string,
  map: HostPidMap,
  publishedAtMs: number,
  validForMs: number,
  access: RegionAccess = withRegion,
): boolean {
  return access(path, REGION_FILE_SIZE, (fd) => void writeHostPidMapFd(fd, map, publishedAtMs, validForMs));
}

/** What the publisher reads from `/proc`; texts are undefined when the process is gone. */
export interface ProcSource {
  pids(): number[];
  cgroup(pid: number): string | undefined;
  status(pid: number): string | undefined;
  stat(pid: number): string | undefined;
}

export function procSource(procRoot: string): ProcSource {
  const read = (pid: number, file: string) => {
    try {
      return readFileSync(join(procRoot, String(pid), file), 'utf8');
    } catch {
      // The process exited since it was listed: it has no container to publish.
      return undefined;
    }
  };
  return {
    pids: () => {
      try {
        return readdirSync(procRoot)
          .filter((name) => /^\d+$/.test(name))
          .map(Number);
      } catch {
        // No /proc to read (not Linux, or not mounted): no pids to map, and the map stays empty.
        return [];
      }
    },
    cgroup: (pid) => read(pid, 'cgroup'),
    status: (pid) => read(pid, 'status'),
    stat: (pid) => read(pid, 'stat'),
  };
}

/** A GPU container and where its map goes. */
export type PidMapTarget = { key: string; podUid: string; regionPath: string };

/** The pod UID a process's cgroup names, or null (host processes, pods' pause and others). */
export type PodOfPid = (pid: number) => string | null;

export function podOfPidReader(proc: ProcSource): PodOfPid {
  return (pid) => {
    const cgroup = proc.cgroup(pid);
    return cgroup === undefined ? null : (parseProcCgroup(cgroup)?.podUid ?? null);
  };
}

export type EntryOfPid = (pid: number) => HostPidEntry;

export function entryOfPidReader(proc: ProcSource): EntryOfPid {
  return (pid) => hostPidEntry(pid, proc.status(pid), proc.stat(pid));
}

/**
 * Remembers per pid what cannot change while the process lives (its pod, its container pid and
 * start time), so a scan reads files only for new pids. A pid that left the listing is forgotten,
 * and every remembered pid is read again every `refreshScans` scans (staggered by pid), which
 * bounds how long a pid reused between two scans keeps a wrong answer. A wrong answer only hides a
 * row or offers one that libvcuda's start-time check then refuses.
 */
export function cachedPidFacts(
  podOf: PodOfPid,
  entryOf: EntryOfPid,
  refreshScans = 30,
): { podOf: PodOfPid; entryOf: EntryOfPid; nextScan(pids: readonly number[]): void } {
  type Facts = { podUid: string | null; entry?: HostPidEntry; dueScan: number };
  const known = new Map<number, Facts>();
  let scan = 0;
  const fresh = (pid: number): Facts => {
    const hit = known.get(pid);
    if (hit && hit.dueScan > scan) return hit;
    const stagger = hit ? 0 : pid % refreshScans;
    const facts: Facts = { podUid: podOf(pid), dueScan: scan + refreshScans - stagger };
    known.set(pid, facts);
    return facts;
  };
  return {
    nextScan(pids) {
      scan++;
      const live = new Set(pids);
      for (const pid of known.keys()) if (!live.has(pid)) known.delete(pid);
    },
    podOf: (pid) => fresh(pid).podUid,
    entryOf(pid) {
      const facts = fresh(pid);
      facts.entry ??= entryOf(pid);
      return facts.entry;
    },
  };
}

/**
 * One scan: the host pids of every target container. Only processes whose cgroup names a pod
 * with a target are mapped further (`containerOfPid`, the compute sampler's own mapping).
 */
export function collectHostPids(
  proc: ProcSource,
  targets: readonly PidMapTarget[],
  containerOfPid: (pid: number) => string | null,
  podOfPid: PodOfPid = podOfPidReader(proc),
  entryOfPid: EntryOfPid = entryOfPidReader(proc),
  pids: readonly number[] = proc.pids(),
): Map<string, HostPidMap> {
  const out = new Map<string, HostPidMap>(targets.map((t) => [t.key, { entries: [] }]));
  const pods = new Set(targets.map((t) => t.podUid));
  for (const pid of pids) {
    const podUid = podOfPid(pid);
    if (podUid === null || !pods.has(podUid)) continue;
    const key = containerOfPid(pid);
    const map = key === null ? undefined : out.get(key);
    if (!map) continue;
    map.entries.push(entryOfPid(pid));
  }
  return out;
}

export type HostPidPublisherOptions = {
  targets: () => readonly PidMapTarget[];
  proc: ProcSource;
  containerOfPid: (pid: number) => string | null;
  /** Wall clock: libvcuda compares the publication time with CLOCK_REALTIME. */
  nowMs: () => number;
  periodMs?: number;
  /** Default: `writeHostPidMap` through the publisher's own kept region handles. */
  write?: (path: string, map: HostPidMap, publishedAtMs: number, validForMs: number) => boolean;
  onError?: (err: unknown) => void;
};

export type HostPidPublisher = {
  /** One scan and publication; returns how many regions were written. */
  publishOnce(): number;
  start(): void;
  /** Stops the period and closes the regions the publisher holds open. */
  stop(): void;
};

export function createHostPidPublisher(opts: HostPidPublisherOptions): HostPidPublisher {
  const periodMs = opts.periodMs ?? HOST_PID_PERIOD_MS;
  const validForMs = periodMs * HOST_PID_VALID_PERIODS;
  // Held from one publication to the next; a container gone since closes at the end of a pass.
  const regions = createRegionHandles();
  const write =
    opts.write ??
    ((path: string, map: HostPidMap, at: number, valid: number) =>
      writeHostPidMap(path, map, at, valid, regions.withRegion));
  const facts = cachedPidFacts(podOfPidReader(opts.proc), entryOfPidReader(opts.proc));

  function publishOnce(): number {
    const targets = opts.targets();
    if (targets.length === 0) {
      regions.closeUnused();
      return 0;
    }
    const pids = opts.proc.pids();
    facts.nextScan(pids);
    const maps = collectHostPids(opts.proc, targets, opts.containerOfPid, facts.podOf, facts.entryOf, pids);
    const now = opts.nowMs();
    let written = 0;
    for (const t of targets) {
      try {
        if (write(t.regionPath, maps.get(t.key) ?? { entries: [] }, now, validForMs)) written++;
      } catch (err) {
        // One bad region must not keep the others from their maps.
        opts.onError?.(err);
      }
    }
    regions.closeUnused();
    return written;
  }

  const task = periodicTask(publishOnce, periodMs, opts.onError);
  return {
    publishOnce,
    start: task.start,
    stop() {
      task.stop();
      regions.closeAll();
    },
  };
}
