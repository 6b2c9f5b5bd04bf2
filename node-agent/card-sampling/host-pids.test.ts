import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REGION_FILE_SIZE, REGION_MAGIC, regionPidMap } from '../../contract/region-layout.js';
import type { PodView } from '../allocation/pod-view.js';
import type { ContainerRecord } from '../allocation/ports.js';
import {
  cachedPidFacts,
  collectHostPids,
  createHostPidPublisher,
  encodeHostPidMap,
  type HostPidMap,
  hostPidEntry,
  parseNsPids,
  parseStartTicks,
  procSource,
  writeHostPidMap,
} from './host-pids.js';
import { containerKey, placementOf, procCgroupReader } from './placement.js';

const tmp = mkdtempSync(join(tmpdir(), 'vcuda-host-pids-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const POD_A = '7f3c2a1e-5b4d-4c3b-9a8f-0e1d2c3b4a59';
const POD_B = '0a1b2c3d-1111-4222-8333-444455556666';
const POD_C = 'cccccccc-cccc-4ccc-8ccc-cccccccccccc';
const MAIN = 'a'.repeat(64);
const SIDECAR = 'b'.repeat(64);
const OTHER = 'c'.repeat(64);
const NO_GPU = 'd'.repeat(64);

function statText(pid: number, name: string, startTicks: number): string {
  // Fields 3..21 then start time (22) and a few more, as the kernel writes them.
  const middle = ['S', '1', String(pid), String(pid), '0', '-1', '4194560', ...Array(12).fill('0')];
  return `${pid} (${name}) ${middle.join(' ')} ${startTicks} 123456 789 18446744073709551615\n`;
}

function statusText(nsPids: number[] | null): string {
  const ns = nsPids ? `NSpid:\t${nsPids.join('\t')}\n` : '';
  return `Name:\tpython\nState:\tS (sleeping)\nTgid:\t${nsPids?.[0] ?? 1}\n${ns}PPid:\t1\n`;
}

/** A /proc directory of fixtures: pid → (cgroup path or none, NSpid, start ticks). */
function fakeProc(processes: { pid: number; cgroup?: string; ns: number[] | null; start: number }[]): string {
  const root = mkdtempSync(join(tmp, 'proc-'));
  for (const p of processes) {
    const dir = join(root, String(p.pid));
    mkdirSync(dir);
    writeFileSync(join(dir, 'cgroup'), p.cgroup ?? '0::/system.slice/containerd.service\n');
    writeFileSync(join(dir, 'status'), statusText(p.ns));
    writeFileSync(join(dir, 'stat'), statText(p.pid, 'python3 (worker)', p.start));
  }
  mkdirSync(join(root, 'self'));
  writeFileSync(join(root, 'uptime'), '1.0 1.0\n');
  return root;
}

const systemdCgroup = (pod: string, id: string) =>
  `0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${pod.replace(/-/g, '_')}.slice/cri-containerd-${id}.scope\n`;
const cgroupfsV1 = (pod: string, id: string) =>
  `12:pids:/kubepods/besteffort/pod${pod}/${id}\n1:name=systemd:/kubepods/besteffort/pod${pod}/${id}\n`;

function record(podUid: string, container: string, regionPath: string): ContainerRecord {
  return { podUid, container, paths: { regionPath }, devices: [] } as unknown as ContainerRecord;
}
function pod(uid: string, containerIds: Record<string, string>): PodView {
  return { uid, containerIds } as unknown as PodView;
}

function makeRegion(name: string, size = REGION_FILE_SIZE): string {
  const path = join(tmp, name);
  const buf = Buffer.alloc(8192);
  buf.write(REGION_MAGIC, 0, 'latin1');
  writeFileSync(path, buf);
  truncateSync(path, size); // sized as libvcuda sizes it (sparse)
  return path;
}

type Decoded = {
  seq: bigint;
  publishedAtMs: bigint;
  validForMs: number;
  flags: number;
  entries: [number, number, bigint][];
};
function decodeMap(path: string): Decoded {
  const buf = readFileSync(path).subarray(regionPidMap.offset);
  const h = regionPidMap.header;
  const count = buf.readUInt32LE(h.count);
  const entries: [number, number, bigint][] = [];
  for (let j = 0; j < count; j++) {
    const at = regionPidMap.headerSize + regionPidMap.entrySize * j;
    entries.push([buf.readUInt32LE(at), buf.readUInt32LE(at + 4), buf.readBigUInt64LE(at + 8)]);
  }
  expect(buf.readUInt32LE(h.version)).toBe(1);
  expect(buf.readUInt32LE(h.entrySize)).toBe(16);
  return {
    seq: buf.readBigUInt64LE(h.seq),
    publishedAtMs: buf.readBigUInt64LE(h.publishedAtMs),
    validForMs: buf.readUInt32LE(h.validForMs),
    flags: buf.readUInt32LE(h.flags),
    entries,
  };
}

describe('parsers', () => {
  it('NSpid: outermost first, the container pid last', () => {
    expect(parseNsPids(statusText([48213, 7]))).toEqual([48213, 7]);
    expect(parseNsPids(statusText([48213]))).toEqual([48213]);
    expect(parseNsPids(statusText(null))).toBeNull();
    expect(parseNsPids('NSpid:\tx\n')).toBeNull();
  });

  it('start time is field 22, whatever the process name holds', () => {
    expect(parseStartTicks(statText(42, 'a) b (c', 987654))).toBe(987654n);
    expect(parseStartTicks('42 (short) S 1\n')).toBeNull();
    expect(parseStartTicks('garbage')).toBeNull();
  });

  it('an entry without status or stat has unknown (0) fields', () => {
    expect(hostPidEntry(9, undefined, undefined)).toEqual({ hostPid: 9, containerPid: 0, startTicks: 0n });
    expect(hostPidEntry(9, statusText([9, 3]), statText(9, 'x', 77))).toEqual({
      hostPid: 9,
      containerPid: 3,
      startTicks: 77n,
    });
  });
});

describe('collectHostPids from /proc fixtures', () => {
  const proc = fakeProc([
    { pid: 1, ns: [1], start: 1 }, // the host's init
    { pid: 4101, cgroup: systemdCgroup(POD_A, MAIN), ns: [4101, 1], start: 5000 },
    { pid: 4102, cgroup: systemdCgroup(POD_A, MAIN), ns: [4102, 17], start: 5100 },
    { pid: 4103, cgroup: systemdCgroup(POD_A, SIDECAR), ns: [4103, 1], start: 5200 }, // no GPU share
    { pid: 4200, cgroup: cgroupfsV1(POD_B, OTHER), ns: [4200, 1], start: 6000 },
    { pid: 4300, cgroup: systemdCgroup(POD_C, NO_GPU), ns: [4300, 1], start: 7000 }, // a pod without GPUs
  ]);
  const regionA = join(tmp, 'a.region');
  const regionB = join(tmp, 'b.region');
  const records = [record(POD_A, 'main', regionA), record(POD_B, 'trainer', regionB)];
  const placement = placementOf(
    () => records,
    () => [pod(POD_A, { main: MAIN, sidecar: SIDECAR }), pod(POD_B, { trainer: OTHER })],
    () => 0,
    procCgroupReader(proc),
  );
  const targets = records.map((r) => ({
    key: containerKey(r.podUid, r.container),
    podUid: r.podUid,
    regionPath: r.paths.regionPath,
  }));

  it("gives each GPU container its own processes with their container pids, and nobody else's", () => {
    const maps = collectHostPids(procSource(proc), targets, (pid) => placement.containerOfPid(pid));
    expect(maps.get(`${POD_A}/main`)?.entries).toEqual([
      { hostPid: 4101, containerPid: 1, startTicks: 5000n },
      { hostPid: 4102, containerPid: 17, startTicks: 5100n },
    ]);
    expect(maps.get(`${POD_B}/trainer`)?.entries).toEqual([{ hostPid: 4200, containerPid: 1, startTicks: 6000n }]);
    expect(maps.size).toBe(2);
  });

  it('the publisher writes every target region under the seqlock, stamped with the wall clock', () => {
    makeRegion('a.region');
    makeRegion('b.region');
    const publisher = createHostPidPublisher({
      targets: () => targets,
      proc: procSource(proc),
      containerOfPid: (pid) => placement.containerOfPid(pid),
      nowMs: () => 1_700_000_000_000,
      periodMs: 1000,
    });
    expect(publisher.publishOnce()).toBe(2);
    expect(publisher.publishOnce()).toBe(2);
    const a = decodeMap(regionA);
    expect(a).toEqual({
      seq: 4n,
      publishedAtMs: 1_700_000_000_000n,
      validForMs: 3000,
      flags: regionPidMap.flags.ownPidNamespace,
      entries: [
        [4101, 1, 5000n],
        [4102, 17, 5100n],
      ],
    });
    expect(decodeMap(regionB).entries).toEqual([[4200, 1, 6000n]]);
  });

  it('libvcuda reads back what the TypeScript writer wrote', () => {
    const dump = resolve(import.meta.dirname, '../../native/build/test/pidns_test');
    if (!existsSync(dump)) return; // `make -C native` has not run; npm test builds it first
    const region = makeRegion('cross.region');
    const now = Date.now();
    writeHostPidMap(
      region,
      {
        entries: [
          { hostPid: 90001, containerPid: 4, startTicks: 1234567890123n },
          { hostPid: 4102, containerPid: 0, startTicks: 0n },
        ],
      },
      now,
      5000,
    );
    const read = JSON.parse(execFileSync(dump, ['--dump', region], { encoding: 'utf8' }));
    expect(read).toEqual({
      count: 2,
      flags: regionPidMap.flags.ownPidNamespace,
      entries: [
        { hostPid: 4102, containerPid: 0, startTicks: 0 },
        { hostPid: 90001, containerPid: 4, startTicks: 1234567890123 },
      ],
    });
    // Published long ago: libvcuda treats the map as absent.
    writeHostPidMap(region, { entries: [{ hostPid: 1, containerPid: 1, startTicks: 1n }] }, now - 60_000, 5000);
    expect(JSON.parse(execFileSync(dump, ['--dump', region], { encoding: 'utf8' })).count).toBe(-1);
  });
});

describe('writeHostPidMap', () => {
  const map: HostPidMap = { entries: [{ hostPid: 30, containerPid: 30, startTicks: 1n }] };

  it('does nothing for an absent region, a file that is not a region, or a region libvcuda has not sized', () => {
    expect(writeHostPidMap(join(tmp, 'absent'), map, 1, 1)).toBe(false);
    const other = join(tmp, 'other');
    writeFileSync(other, Buffer.alloc(8192));
    expect(writeHostPidMap(other, map, 1, 1)).toBe(false);
    const small = makeRegion('small.region', 8192);
    expect(writeHostPidMap(small, map, 1, 1)).toBe(false);
    expect(readFileSync(small).length).toBe(8192); // never grown here
  });

  it('recovers from a writer that died with seq odd', () => {
    const path = makeRegion('odd.region');
    const buf = Buffer.alloc(8);
    buf.writeBigUInt64LE(7n);
    const fd = openSync(path, 'r+');
    writeSync(fd, buf, 0, 8, regionPidMap.offset);
    closeSync(fd);
    writeHostPidMap(path, map, 1, 1);
    expect(decodeMap(path).seq).toBe(8n);
  });

  it('no namespace: host and container pids equal, no flag', () => {
    const buf = encodeHostPidMap(map, 1, 1);
    expect(buf.readUInt32LE(regionPidMap.header.flags - 8)).toBe(0);
  });

  it('sorts by host pid and marks a map past the capacity as truncated', () => {
    const many: HostPidMap = {
      entries: Array.from({ length: regionPidMap.capacity + 5 }, (_, i) => ({
        hostPid: 100_000 - i,
        containerPid: i + 1,
        startTicks: BigInt(i),
      })),
    };
    const buf = encodeHostPidMap(many, 1, 1);
    const h = regionPidMap.header;
    expect(buf.readUInt32LE(h.count - 8)).toBe(regionPidMap.capacity);
    expect(buf.readUInt32LE(h.flags - 8)).toBe(regionPidMap.flags.ownPidNamespace | regionPidMap.flags.truncated);
    const first = buf.readUInt32LE(regionPidMap.headerSize - 8);
    const second = buf.readUInt32LE(regionPidMap.headerSize - 8 + regionPidMap.entrySize);
    expect(first).toBeLessThan(second);
    expect(first).toBe(100_000 - (regionPidMap.capacity + 4));
  });
});

describe('cachedPidFacts', () => {
  function counting() {
    const reads: number[] = [];
    const podOf = (pid: number) => {
      reads.push(pid);
      return pid < 100 ? POD_A : null;
    };
    const entryOf = (pid: number) => {
      reads.push(-pid);
      return { hostPid: pid, containerPid: pid - 1, startTicks: BigInt(reads.length) };
    };
    return { reads, podOf, entryOf };
  }

  it('reads a living process once, and again only after it left the listing', () => {
    const c = counting();
    const facts = cachedPidFacts(c.podOf, c.entryOf, 1000);
    facts.nextScan([10, 500]);
    expect([facts.podOf(10), facts.podOf(500), facts.entryOf(10).containerPid]).toEqual([POD_A, null, 9]);
    facts.nextScan([10, 500]);
    facts.podOf(10);
    facts.podOf(500);
    facts.entryOf(10);
    expect(c.reads).toEqual([10, 500, -10]);
    // Pid 10 exits; a new process with pid 10 is read afresh.
    facts.nextScan([500]);
    facts.nextScan([10, 500]);
    const again = facts.entryOf(10);
    expect(c.reads).toEqual([10, 500, -10, 10, -10]);
    expect(again.startTicks).toBe(5n);
  });

  it('reads every remembered pid again after refreshScans scans', () => {
    const c = counting();
    const facts = cachedPidFacts(c.podOf, c.entryOf, 3);
    for (let scan = 0; scan < 7; scan++) {
      facts.nextScan([30]);
      facts.podOf(30);
    }
    // Pid 30 staggers to 30 % 3 = 0: read at scans 1, 4 and 7.
    expect(c.reads).toEqual([30, 30, 30]);
  });
});

// A real pid namespace where the machine allows an unprivileged one (CI may not: then skipped).
const canUnshare =
  spawnSync('unshare', ['-rpf', '--mount-proc', '--kill-child', 'true'], { timeout: 5000 }).status === 0;

describe.skipIf(!canUnshare)('in a real pid namespace', () => {
  it('NSpid names the pid inside, and the start time is the one the namespace itself reads', async () => {
    const child = spawn(
      'unshare',
      ['-rpf', '--mount-proc', '--kill-child', 'sh', '-c', 'cat /proc/1/stat; exec sleep 10'],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    try {
      const inside = await new Promise<string>((done) => child.stdout.once('data', (d: Buffer) => done(d.toString())));
      const host = procSource('/proc');
      const hostPid = host
        .pids()
        .find((pid) => /^PPid:\s+(\d+)$/m.exec(host.status(pid) ?? '')?.[1] === String(child.pid));
      expect(hostPid).toBeDefined();
      const entry = hostPidEntry(hostPid as number, host.status(hostPid as number), host.stat(hostPid as number));
      expect(entry.containerPid).toBe(1);
      expect(entry.hostPid).not.toBe(1);
      expect(entry.startTicks).toBe(parseStartTicks(inside));
      expect(encodeHostPidMap({ entries: [entry] }, 1, 1).readUInt32LE(regionPidMap.header.flags - 8)).toBe(
        regionPidMap.flags.ownPidNamespace,
      );
    } finally {
      child.kill('SIGKILL');
    }
  });
});
