import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REGION_MAGIC, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { chooseComputeSensor, createComputeSampler, tickSensor } from './compute-sensor.js';
import type { CounterGuardVerdict } from './counter-guard.js';

const tmp = mkdtempSync(join(tmpdir(), 'vcuda-compute-sensor-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const source = (supported?: () => boolean) => ({
  processUtilization: () => [],
  utilizationRates: () => ({ gpuPercent: 0 }),
  ...(supported ? { processUtilizationSupported: supported } : {}),
});

const supporting = source(() => true);

describe('chooseComputeSensor', () => {
  it('measures in-process when configured, whatever NVML offers', () => {
    expect(chooseComputeSensor(supporting, 0, 'in-process')).toEqual({
      sensor: 'in-process',
      reason: 'configured',
      wholeCardsByNvml: true,
    });
    expect(chooseComputeSensor(source(), 0, 'in-process')).toMatchObject({
      sensor: 'in-process',
      wholeCardsByNvml: true,
    });
    // No per-process utilization (MIG): nothing for NVML to read, whole cards included.
    expect(
      chooseComputeSensor(
        source(() => false),
        0,
        'in-process',
      ),
    ).toMatchObject({ sensor: 'in-process', wholeCardsByNvml: false });
    // The default.
    expect(chooseComputeSensor(supporting, 0)).toMatchObject({ sensor: 'in-process', wholeCardsByNvml: true });
  });

  it('uses NVML when configured, except where NVML says per-process utilization is not supported (MIG)', () => {
    expect(chooseComputeSensor(supporting, 0, 'nvml')).toEqual({
      sensor: 'nvml',
      reason: 'configured',
      wholeCardsByNvml: false,
    });
    expect(chooseComputeSensor(source(), 0, 'nvml').sensor).toBe('nvml');
    expect(
      chooseComputeSensor(
        source(() => false),
        0,
        'nvml',
      ),
    ).toEqual({
      sensor: 'in-process',
      reason: 'nvml-unsupported',
      wholeCardsByNvml: false,
    });
  });

  it('keeps the configured NVML when the probe itself fails', () => {
    const failing = source(() => {
      throw new Error('driver gone');
    });
    expect(chooseComputeSensor(failing, 0, 'nvml').sensor).toBe('nvml');
    // With the in-process sensor configured, a card whose probe fails is not read from NVML at all.
    expect(chooseComputeSensor(failing, 0, 'in-process')).toMatchObject({
      sensor: 'in-process',
      wholeCardsByNvml: false,
    });
  });
});

describe('tickSensor', () => {
  it('reads NVML only for a card whose every holder libvcuda does not time (whole cards)', () => {
    expect(tickSensor([{ unmeasured: true }])).toBe('nvml');
    expect(tickSensor([{ unmeasured: true }, { unmeasured: true }])).toBe('nvml');
    expect(tickSensor([{ unmeasured: true }, {}])).toBe('in-process');
    expect(tickSensor([{}])).toBe('in-process');
    expect(tickSensor([])).toBe('in-process');
  });
});

/**
 * One tenant on a card NVML reads 70 % busy, its kernels' 200 ms intervals published as NVML
 * does; its in-process counter grows by `countersPct` of each tick (0: a program that keeps
 * writing it back). Ticks of 100 ms for `seconds`, the first `emptyTicks` of them with no
 * container on the card (NVML still reads it 70 % busy: something vcuda does not place).
 */
function tenantOnCard(countersPct: number, seconds: number, jumpEveryTicks = 0, emptyTicks = 0) {
  const region = join(tmp, `r-${Math.random()}`);
  const buf = Buffer.alloc(regionDeviceOffset(1));
  buf.write(REGION_MAGIC, 0, 'latin1');
  writeFileSync(region, buf);
  let now = 1_700_000_000_000;
  let busyNs = 0n;
  const checks: CounterGuardVerdict[] = [];
  let placementReads = 0;
  let tick = 0;
  let deviceReadsWhileEmpty = 0;
  const { sampler } = createComputeSampler({
    cardIndex: 0,
    periodMs: 100,
    nowMs: () => now,
    source: {
      processUtilizationSupported: () => true,
      utilizationRates: () => {
        if (tick < emptyTicks) deviceReadsWhileEmpty += 1;
        return { gpuPercent: 70 };
      },
      processUtilization: (_card, sinceUs) => {
        const out = [];
        for (let t = Math.floor(now / 200) * 200; t > now - 1_000; t -= 200) {
          if (t * 1000 > sinceUs) out.push({ pid: 42, timestampUs: t * 1000, smPercent: 70 });
        }
        return out.reverse();
      },
    },
    placement: {
      containersOn: () => {
        placementReads += 1;
        return tick < emptyTicks ? [] : [{ key: 'tenant', regionPath: region, deviceIndex: 0 }];
      },
      containerOfPid: (pid) => (pid === 42 ? 'tenant' : null),
    },
    onCounterCheck: (v) => checks.push(v),
  });
  for (let i = 0; i < seconds * 10; i++, tick++) {
    now += 100;
    busyNs += BigInt(countersPct * 1e6);
    // A counter kept low but for one jump of a whole window's worth now and then.
    if (jumpEveryTicks > 0 && i % jumpEveryTicks === jumpEveryTicks - 1) busyNs += 10_000_000_000n;
    const b = readFileSync(region);
    b.writeBigUInt64LE(busyNs, regionDeviceOffset(0) + regionOffsets.device.busyNs);
    writeFileSync(region, b);
    sampler.sampleOnce();
  }
  // How many of this process's descriptors hold the region open (each sampler keeps its own).
  const regionFds = readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === region;
    } catch {
      return false;
    }
  }).length;
  sampler.stop();
  const published = readFileSync(region).readUInt32LE(regionDeviceOffset(0) + regionOffsets.device.measuredShareBp);
  return {
    checks,
    published,
    placementReadsPerTick: placementReads / (seconds * 10),
    regionFds,
    deviceReadsWhileEmpty,
  };
}

describe('the in-process sensor held to NVML', () => {
  it('measures a card with NVML once its counters account for far less than NVML saw, for 30 s', () => {
    const early = tenantOnCard(0, 25);
    // Two windows under-counted: still the counters, which say the tenant used nothing.
    expect(early.checks.map((c) => c.strikes)).toEqual([1, 2]);
    expect(early.published).toBe(0);
    const { checks, published, regionFds } = tenantOnCard(0, 40);
    expect(checks).toHaveLength(3);
    expect(checks[2]).toMatchObject({ deviceBp: 7000, countersBp: 0, distrusted: true });
    // From then on the driver's per-process figure is the tenant's share, and only NVML's
    // sampler keeps the region open: the counters' handle is closed.
    expect(published).toBe(7000);
    expect(regionFds).toBe(1);
  });

  it('credits a jump as the limiter does, so one that would cover a window cannot hide a low counter', () => {
    // 10 s of busy time at once every 10 s: counted raw it would read 100 % against NVML's 70.
    const { checks, published } = tenantOnCard(0, 40, 100);
    expect(checks.slice(0, 3).map((c) => c.distrusted)).toEqual([false, false, true]);
    expect(checks[0]?.countersBp).toBeLessThanOrEqual(2_500);
    expect(published).toBe(7000);
  });

  it('judges nothing while the card holds no container: busy by something else, it is not the counters', () => {
    // 40 s empty at 70 % busy, then an honest tenant for 40 s.
    const { checks, published, deviceReadsWhileEmpty } = tenantOnCard(62, 80, 0, 400);
    expect(deviceReadsWhileEmpty).toBe(0);
    expect(checks.map((c) => c.distrusted)).toEqual([false, false, false, false]);
    expect(published).toBe(6200);
  });

  it('keeps the counters of an honest tenant', () => {
    const { checks, published, placementReadsPerTick } = tenantOnCard(62, 40);
    expect(checks.map((c) => c.distrusted)).toEqual([false, false, false, false]);
    expect(published).toBe(6200);
    // The check and the samples share one look at the card's containers (and one read of their counters).
    expect(placementReadsPerTick).toBe(1);
  });
});
