import {
  closeSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REGION_FILE_SIZE, REGION_MAGIC, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { type ContainerOnCard, createCardSampler } from './card-sampler.js';
import { createHostPidPublisher, type ProcSource, writeHostPidMap } from './host-pids.js';
import { type ShareSample, writeShareSample } from './region-feedback.js';
import { createRegionHandles } from './region-handles.js';

const tmp = mkdtempSync(join(tmpdir(), 'vcuda-region-handles-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function makeRegion(name: string, magic = REGION_MAGIC): string {
  const path = join(tmp, name);
  const buf = Buffer.alloc(8192);
  buf.write(magic, 0, 'latin1');
  writeFileSync(path, buf);
  return path;
}

const openFds = () => readdirSync('/proc/self/fd').length;
const sample = (timeMs: number): ShareSample => ({ timeMs, measuredShareBp: 1234, cardBusyBp: 5000, periodMs: 100 });
const block = regionDeviceOffset(0);
const d = regionOffsets.device;

function sampleAt(fdOrPath: number | string): { seq: bigint; timeMs: bigint } {
  let buf: Buffer;
  if (typeof fdOrPath === 'string') buf = readFileSync(fdOrPath);
  else {
    buf = Buffer.alloc(block + 256);
    readSync(fdOrPath, buf, 0, buf.length, 0);
  }
  return { seq: buf.readBigUInt64LE(block + d.sampleSeq), timeMs: buf.readBigUInt64LE(block + d.sampleTimeMs) };
}

describe('region handles', () => {
  it('writes a region replaced at the same path between passes into the new file, never the deleted one', () => {
    const handles = createRegionHandles();
    const path = makeRegion('replaced');
    expect(writeShareSample(path, 0, sample(1), handles.withRegion)).toBe(true);
    handles.closeUnused(); // the pass ends: the next one checks the handle again
    const old = openSync(path, 'r'); // the old inode, to see whether it is written after its unlink
    try {
      rmSync(path);
      makeRegion('replaced'); // a new Allocate/PreStart of the same allocation directory
      expect(writeShareSample(path, 0, sample(2), handles.withRegion)).toBe(true);
      expect(sampleAt(path)).toEqual({ seq: 2n, timeMs: 2n });
      expect(sampleAt(old)).toEqual({ seq: 2n, timeMs: 1n });
      expect(handles.openCount()).toBe(1);
    } finally {
      closeSync(old);
      handles.closeAll();
    }
  });

  it('keeps one handle open across writes and closes it once no pass asks for it', () => {
    const handles = createRegionHandles();
    const a = makeRegion('kept-a');
    const b = makeRegion('kept-b');
    const before = openFds();
    for (let t = 1; t <= 5; t++) {
      writeShareSample(a, 0, sample(t), handles.withRegion);
      writeShareSample(b, 0, sample(t), handles.withRegion);
      handles.closeUnused();
    }
    expect(openFds()).toBe(before + 2);
    expect(sampleAt(a)).toEqual({ seq: 10n, timeMs: 5n });
    writeShareSample(a, 0, sample(6), handles.withRegion);
    handles.closeUnused(); // b was not written this pass: its container is gone
    expect(openFds()).toBe(before + 1);
    handles.closeAll();
    expect(openFds()).toBe(before);
  });

  it('still refuses a file whose magic is wrong, and keeps no handle to it', () => {
    const handles = createRegionHandles();
    const path = makeRegion('not-a-region', 'NOTAREGN');
    const before = openFds();
    expect(writeShareSample(path, 0, sample(1), handles.withRegion)).toBe(false);
    expect(writeShareSample(join(tmp, 'absent'), 0, sample(1), handles.withRegion)).toBe(false);
    expect(handles.openCount()).toBe(0);
    expect(openFds()).toBe(before);
    expect(sampleAt(path).seq).toBe(0n);
  });

  it('writes a kept region once libvcuda has grown it to the size asked for', () => {
    const handles = createRegionHandles();
    const path = makeRegion('grows');
    const map = { entries: [{ hostPid: 10, containerPid: 1, startTicks: 5n }] };
    expect(writeHostPidMap(path, map, 1, 3000, handles.withRegion)).toBe(false);
    expect(handles.openCount()).toBe(1);
    truncateSync(path, REGION_FILE_SIZE);
    // Within a pass the size is read once; the next pass sees the grown file.
    expect(writeHostPidMap(path, map, 1, 3000, handles.withRegion)).toBe(false);
    handles.closeUnused();
    expect(writeHostPidMap(path, map, 1, 3000, handles.withRegion)).toBe(true);
    handles.closeAll();
  });

  it('drops the handle of a region truncated under it, so the next write opens afresh', () => {
    const handles = createRegionHandles();
    const path = makeRegion('truncated');
    writeShareSample(path, 0, sample(1), handles.withRegion);
    truncateSync(path, 16);
    expect(() => writeShareSample(path, 0, sample(2), handles.withRegion)).toThrow(/device block 0/);
    expect(handles.openCount()).toBe(0);
  });
});

describe('writers that keep their regions open', () => {
  it("a card sampler closes a released container's region, and all of them when it stops", () => {
    const a = makeRegion('sampler-a');
    const b = makeRegion('sampler-b');
    let placed: ContainerOnCard[] = [
      { key: 'pod-a/main', regionPath: a, deviceIndex: 0 },
      { key: 'pod-b/main', regionPath: b, deviceIndex: 0 },
    ];
    let now = 1_000;
    const sampler = createCardSampler({
      cardIndex: 0,
      periodMs: 100,
      nowMs: () => now,
      // An idle card: every tick writes a 0 to each placed container.
      source: { processUtilization: () => [], utilizationRates: () => ({ gpuPercent: 0 }) },
      placement: { containersOn: () => placed, containerOfPid: () => null },
    });
    const before = openFds();
    for (let i = 0; i < 3; i++) {
      now += 100;
      sampler.sampleOnce();
    }
    expect(sampleAt(a).seq).toBe(6n);
    expect(openFds()).toBe(before + 2);
    placed = placed.slice(0, 1); // pod-b's container released
    now += 100;
    sampler.sampleOnce();
    expect(openFds()).toBe(before + 1);
    expect(sampleAt(b).seq).toBe(6n);
    sampler.stop();
    expect(openFds()).toBe(before);
  });

  it('the host-pid publisher closes a gone container’s region, and all of them when it stops', () => {
    const a = makeRegion('pids-a');
    const b = makeRegion('pids-b');
    truncateSync(a, REGION_FILE_SIZE);
    truncateSync(b, REGION_FILE_SIZE);
    let targets = [
      { key: 'a', podUid: 'pa', regionPath: a },
      { key: 'b', podUid: 'pb', regionPath: b },
    ];
    const proc: ProcSource = {
      pids: () => [],
      cgroup: () => undefined,
      status: () => undefined,
      stat: () => undefined,
    };
    const publisher = createHostPidPublisher({
      targets: () => targets,
      proc,
      containerOfPid: () => null,
      nowMs: () => 1,
    });
    const before = openFds();
    expect(publisher.publishOnce()).toBe(2);
    expect(publisher.publishOnce()).toBe(2);
    expect(openFds()).toBe(before + 2);
    targets = targets.slice(1);
    expect(publisher.publishOnce()).toBe(1);
    expect(openFds()).toBe(before + 1);
    targets = [];
    publisher.publishOnce();
    expect(openFds()).toBe(before);
    targets = [{ key: 'a', podUid: 'pa', regionPath: a }];
    publisher.publishOnce();
    publisher.stop();
    expect(openFds()).toBe(before);
  });
});
