import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REGION_MAGIC, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { type BusySamplerOptions, createBusySampler } from './busy-sampler.js';

const tmp = mkdtempSync(join(tmpdir(), 'vcuda-busy-sampler-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const d = regionOffsets.device;

function makeRegion(name: string): string {
  const path = join(tmp, name);
  const buf = Buffer.alloc(regionDeviceOffset(2));
  buf.write(REGION_MAGIC, 0, 'latin1');
  writeFileSync(path, buf);
  return path;
}

/** Sets the busy-ns counter of device `index` as libvcuda would. */
function setBusy(path: string, index: number, ns: number): void {
  const buf = readFileSync(path);
  buf.writeBigUInt64LE(BigInt(ns), regionDeviceOffset(index) + d.busyNs);
  writeFileSync(path, buf);
}

/** The sample the sampler last published into device `index`. */
function sampleIn(path: string, index: number) {
  const buf = readFileSync(path);
  const at = regionDeviceOffset(index);
  return {
    seq: Number(buf.readBigUInt64LE(at + d.sampleSeq)),
    timeMs: Number(buf.readBigUInt64LE(at + d.sampleTimeMs)),
    measuredBp: buf.readUInt32LE(at + d.measuredShareBp),
    cardBusyBp: buf.readUInt32LE(at + d.cardBusyBp),
    periodMs: buf.readUInt32LE(at + d.samplePeriodMs),
  };
}

function twoTenants(extra: Partial<BusySamplerOptions> = {}) {
  const a = makeRegion(`a-${Math.random()}`);
  const b = makeRegion(`b-${Math.random()}`);
  let now = 1_700_000_000_000;
  const sampler = createBusySampler({
    cardIndex: 0,
    periodMs: 50,
    minSamplePeriodMs: 50,
    nowMs: () => now,
    placement: {
      containersOn: () => [
        { key: 'a', regionPath: a, deviceIndex: 0 },
        { key: 'b', regionPath: b, deviceIndex: 1 },
      ],
      containerOfPid: () => null,
    },
    ...extra,
  });
  return { a, b, sampler, advance: (ms: number) => (now += ms), now: () => now };
}

describe('createBusySampler', () => {
  it('publishes each container’s counter growth over the tick as its share, the sum as the card’s', () => {
    const t = twoTenants();
    t.advance(50);
    t.sampler.sampleOnce(); // baselines: an idle card, published with no period
    expect(sampleIn(t.a, 0)).toMatchObject({ seq: 2, measuredBp: 0, periodMs: 0 });
    t.advance(100);
    setBusy(t.a, 0, 30e6);
    setBusy(t.b, 1, 50e6);
    t.sampler.sampleOnce();
    expect(sampleIn(t.a, 0)).toEqual({ seq: 4, timeMs: t.now(), measuredBp: 3000, cardBusyBp: 8000, periodMs: 100 });
    expect(sampleIn(t.b, 1)).toMatchObject({ measuredBp: 5000, cardBusyBp: 8000, periodMs: 100 });
    t.sampler.stop();
  });

  it('publishes nothing while no counter moved on a card busy until lately; the next sample spans both ticks', () => {
    const t = twoTenants();
    t.advance(50);
    t.sampler.sampleOnce();
    t.advance(50);
    setBusy(t.a, 0, 25e6);
    t.sampler.sampleOnce();
    const first = sampleIn(t.a, 0);
    t.advance(50);
    t.sampler.sampleOnce(); // nothing new: not a 0
    expect(sampleIn(t.a, 0)).toEqual(first);
    t.advance(50);
    setBusy(t.a, 0, 75e6);
    t.sampler.sampleOnce();
    expect(sampleIn(t.a, 0)).toMatchObject({ measuredBp: 5000, periodMs: 100 });
    t.sampler.stop();
  });

  it('reads nothing on ticks sooner than the shortest sample period after the last sample', () => {
    const a = makeRegion(`p-${Math.random()}`);
    let now = 1_700_000_000_000;
    const sampler = createBusySampler({
      cardIndex: 0,
      periodMs: 50,
      nowMs: () => now,
      placement: { containersOn: () => [{ key: 'a', regionPath: a, deviceIndex: 0 }], containerOfPid: () => null },
    });
    now += 150;
    sampler.sampleOnce();
    for (let i = 1; i <= 3; i++) {
      now += 50;
      setBusy(a, 0, i * 20e6);
      sampler.sampleOnce();
      if (i < 3) expect(sampleIn(a, 0).seq, `tick ${i}`).toBe(2);
    }
    expect(sampleIn(a, 0)).toMatchObject({ seq: 4, measuredBp: 4000, periodMs: 150 });
    sampler.stop();
  });

  it('publishes an idle card with no period once nothing moved for idleAfterMs', () => {
    const t = twoTenants();
    t.advance(50);
    t.sampler.sampleOnce();
    t.advance(50);
    setBusy(t.b, 1, 10e6);
    t.sampler.sampleOnce();
    for (let i = 0; i < 41; i++) {
      t.advance(50);
      t.sampler.sampleOnce();
    }
    expect(sampleIn(t.b, 1)).toMatchObject({ timeMs: t.now(), measuredBp: 0, cardBusyBp: 0, periodMs: 0 });
    t.sampler.stop();
  });

  it('floors the card busy share at NVML’s device utilization when given it, never an idle sample', () => {
    const t = twoTenants({ deviceBusyBp: () => 9_000 });
    t.advance(50);
    t.sampler.sampleOnce();
    expect(sampleIn(t.a, 0)).toMatchObject({ cardBusyBp: 0, periodMs: 0 });
    t.advance(100);
    setBusy(t.a, 0, 40e6);
    t.sampler.sampleOnce();
    // Its own 40 %, the card 90 % busy: time slices of others the counters do not see.
    expect(sampleIn(t.a, 0)).toMatchObject({ measuredBp: 4000, cardBusyBp: 9000, periodMs: 100 });
    t.sampler.stop();
  });
});
