/**
 * The card sampler's second source, for cards where NVML has no per-process utilization (MIG):
 * every period it reads the busy-ns counter libvcuda's in-process sensor keeps in each placed
 * container's region (device block +32), turns the growth into shares (busy-shares.ts) and writes
 * them back as the NVML path does (+64..+95), so the limiter steers the same way from either.
 *
 * Samples are stamped with this tick's wall time and carry the time since the previous
 * publication as their period, so they tile time. A tick in which no counter moved publishes
 * nothing while the card was busy within `idleAfterMs` (a tenant's samples land in bursts; the
 * next sample then spans both ticks); after that the card is idle and is published with period 0,
 * as the NVML path does, so the limiter restarts its window instead of learning from a 0.
 */
import { readSync } from 'node:fs';
import { regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { type BusyReading, computeBusyShares } from './busy-shares.js';
import { type CardSampler, type CardSamplerOptions, type ContainerOnCard, periodicSampler } from './card-sampler.js';
import type { ContainerShares } from './container-shares.js';
import { writeShareSampleFd } from './region-feedback.js';
import { createRegionHandles, type RegionHandles } from './region-handles.js';

export type BusySamplerOptions = Omit<CardSamplerOptions, 'source' | 'write'> & {
  /**
   * Shortest period a sample covers (default 150 ms, about NVML's): ticks in between only read.
   * Each container's counter grows in steps (a timed launch stands for the launches of its marker
   * interval, and is added when it completes), so a short period is noisy; the limiter folds one
   * window per sample at the least.
   */
  minSamplePeriodMs?: number;
  /**
   * NVML's busy share of the whole card now, in basis points (undefined: none). Given, a sample's
   * card busy share is the larger of it and the counters' sum, as on the NVML path
   * (container-shares.ts), so a soft tenant sees a card its neighbours keep busy in time slices the
   * counters do not add up to (`cardBusyFromDevice`, card-sampler.ts).
   */
  deviceBusyBp?: () => number | undefined;
};

const DEFAULT_IDLE_AFTER_MS = 2000;
const DEFAULT_MIN_SAMPLE_PERIOD_MS = 150;
const NOTHING: ContainerShares = {
  byContainer: new Map(),
  cardBusyBp: 0,
  unattributedBp: 0,
  newestUs: 0,
  intervals: 0,
};

/** The busy-ns counter of device `deviceIndex` in an open region. */
export function readBusyNsFd(fd: number, deviceIndex: number): bigint {
  const buf = Buffer.alloc(8);
  const at = regionDeviceOffset(deviceIndex) + regionOffsets.device.busyNs;
  return readSync(fd, buf, 0, 8, at) === 8 ? buf.readBigUInt64LE(0) : 0n;
}

/** The busy-ns counter of each of `containers` (those placed on one card) that has a region. */
export function readBusyCounters(containers: readonly ContainerOnCard[], regions: RegionHandles): BusyReading[] {
  const readings: BusyReading[] = [];
  for (const c of containers) {
    const minSize = regionDeviceOffset(c.deviceIndex) + 256;
    regions.withRegion(c.regionPath, minSize, (fd) => {
      readings.push({ key: c.key, busyNs: readBusyNsFd(fd, c.deviceIndex) });
    });
  }
  return readings;
}

/** One tick's view of a card: the containers placed on it, and their counters read through `regions`. */
export type BusyTick = { containers: readonly ContainerOnCard[]; readings: readonly BusyReading[] };

/**
 * The in-process sensor's sampler. `sampleTick` publishes from a tick read elsewhere (the compute
 * sensor reads the counters once for its check and for this), through the same `regions`, whose
 * pass the caller ends; `sampleOnce` reads its own.
 */
export type BusySampler = CardSampler & { sampleTick(read: () => BusyTick): ContainerShares };

export function createBusySampler(opts: BusySamplerOptions, regions = createRegionHandles()): BusySampler {
  let lastMs = Math.floor(opts.nowMs());
  let lastActiveMs = Number.NEGATIVE_INFINITY;
  let baseline = new Map<string, bigint>();
  const idleAfterMs = opts.idleAfterMs ?? DEFAULT_IDLE_AFTER_MS;
  const minPeriodMs = Math.max(1, opts.minSamplePeriodMs ?? DEFAULT_MIN_SAMPLE_PERIOD_MS);

  /** `read` is called only once a sample is due. The pass over `regions` is the caller's to end. */
  function sampleTick(read: () => BusyTick): ContainerShares {
    const timeMs = Math.floor(opts.nowMs());
    // A tick too soon after the last publication measures nothing yet.
    if (timeMs - lastMs < minPeriodMs) return NOTHING;
    const { containers, readings } = read();
    const result = computeBusyShares(baseline, readings, timeMs - lastMs);
    const idle = result.addedNs === 0;
    if (!idle) lastActiveMs = timeMs;
    // A container new this tick only set its baseline: keep the others' so the next sample spans
    // both ticks when this one publishes nothing.
    if (idle && timeMs - lastActiveMs < idleAfterMs) {
      for (const [key, v] of result.baseline) if (!baseline.has(key)) baseline.set(key, v);
      return result.shares;
    }
    baseline = result.baseline;
    const samplePeriodMs = idle ? 0 : Math.max(1, Math.round(timeMs - lastMs));
    lastMs = timeMs;
    let written = 0;
    // An idle sample carries no period, and no floor: nothing of ours ran to be held back.
    const device = idle ? undefined : opts.deviceBusyBp?.();
    const cardBusyBp = Math.max(result.shares.cardBusyBp, Math.min(10_000, device ?? 0));
    for (const c of containers) {
      const sample = {
        timeMs,
        measuredShareBp: result.shares.byContainer.get(c.key) ?? 0,
        cardBusyBp,
        periodMs: samplePeriodMs,
      };
      if (regions.withRegion(c.regionPath, 0, (fd) => void writeShareSampleFd(fd, c.deviceIndex, sample))) written++;
    }
    opts.onSample?.(result.shares, written);
    return result.shares;
  }

  const sampleOnce = () => {
    // A tick that reads nothing must not end a pass: it would close every handle.
    let read = false;
    try {
      return sampleTick(() => {
        read = true;
        const containers = opts.placement.containersOn(opts.cardIndex);
        return { containers, readings: readBusyCounters(containers, regions) };
      });
    } finally {
      if (read) regions.closeUnused();
    }
  };
  return { ...periodicSampler(sampleOnce, opts, regions), sampleTick };
}
