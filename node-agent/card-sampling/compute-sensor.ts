/**
 * Which measurement feeds a card's compute limiters, chosen once per card when its sampler is
 * made: libvcuda's in-process sensor (the default: the busy time it measures and keeps in each
 * region, busy-sampler.ts), or NVML's per-process utilization where the card has it and the node is
 * configured for it (MIG has none: NVML answers NOT_SUPPORTED, and the in-process sensor reads it).
 * On a real H200 NVML gave each 200 ms sample wholly to one process while two time-sliced the card
 * (one read 99 %, the other 0 %, alternating), which no controller can steer by; the in-process
 * sensor split the same card within a few points (BENCHMARKS.md, "Real GPU"). Both write the same
 * samples; native/COMPUTE.md describes both sensors.
 */
import { createBusySampler, readBusyCounters } from './busy-sampler.js';
import { type BusyReading, computeBusyShares } from './busy-shares.js';
import { type CardSampler, type CardSamplerOptions, createCardSampler, periodicSampler } from './card-sampler.js';
import { createCounterGuard } from './counter-guard.js';
import { createRegionHandles } from './region-handles.js';

export const COMPUTE_SENSORS = ['in-process', 'nvml'] as const;
export type ComputeSensor = (typeof COMPUTE_SENSORS)[number];
/** The node agent's `computeSensor` when none is configured. */
export const DEFAULT_COMPUTE_SENSOR: ComputeSensor = 'in-process';

/** What decided a card's sensor, for the agent's log line. */
export type ComputeSensorReason = 'configured' | 'nvml-unsupported';

/** What decides a card's sensor: the node's setting, and what NVML answers for the card. */
export type SensorChoice = {
  sensor: ComputeSensor;
  reason: ComputeSensorReason;
  /** In-process only: NVML may still read a card held whole, which libvcuda does not time. */
  wholeCardsByNvml: boolean;
};

/**
 * The sensor for a card (pure over the source's answer), probing NVML once: `preferred` where the
 * card can give it; NVML falls back to in-process where NVML has no per-process utilization. A
 * probe that throws keeps a configured NVML, and leaves whole cards to the in-process sensor.
 */
export function chooseComputeSensor(
  source: CardSamplerOptions['source'],
  cardIndex: number,
  preferred: ComputeSensor = DEFAULT_COMPUTE_SENSOR,
): SensorChoice {
  let supported: boolean | undefined;
  let probeFailed = false;
  try {
    supported = source.processUtilizationSupported?.(cardIndex);
  } catch {
    probeFailed = true;
  }
  if (preferred === 'nvml' && supported === false) {
    return { sensor: 'in-process', reason: 'nvml-unsupported', wholeCardsByNvml: false };
  }
  if (preferred === 'nvml') return { sensor: 'nvml', reason: 'configured', wholeCardsByNvml: false };
  return { sensor: 'in-process', reason: 'configured', wholeCardsByNvml: !probeFailed && supported !== false };
}

/**
 * Which sensor reads this tick: NVML when every container on the card is one libvcuda does not time
 * (whole cards, hard 100 %: one holder, so NVML's per-process figure is its own), the in-process
 * counters otherwise. Pure over the placement.
 */
export function tickSensor(containers: readonly { unmeasured?: boolean }[]): ComputeSensor {
  return containers.length > 0 && containers.every((c) => c.unmeasured) ? 'nvml' : 'in-process';
}

/** NVML's device busy share of the card in basis points; undefined where it has none to give. */
function deviceBusyBp(source: CardSamplerOptions['source'], cardIndex: number): number | undefined {
  try {
    return source.utilizationRates(cardIndex).gpuPercent * 100;
  } catch {
    return undefined;
  }
}

/**
 * The in-process sensor where the card also has NVML's figures: each tick reads the sensor
 * `tickSensor` names, so a whole card's holder (never timed by libvcuda) is still measured for its
 * usage, and shares are measured by their own launches. The counters are the containers' own to
 * write, so every tick also holds their growth against NVML's device utilization (counter-guard.ts):
 * once they account for far less than NVML saw busy, the card is measured by NVML from then on.
 */
function inProcessWithWholeCards(opts: CardSamplerOptions): CardSampler {
  const nvml = createCardSampler(opts);
  const device = () => deviceBusyBp(opts.source, opts.cardIndex);
  // One set of handles, one read of the counters per tick: the check and the samples share both.
  const regions = createRegionHandles();
  const busy = createBusySampler({ ...opts, ...(opts.cardBusyFromDevice ? { deviceBusyBp: device } : {}) }, regions);
  const guard = createCounterGuard(opts.counterGuard);
  let baseline = new Map<string, bigint>();
  let lastMs = opts.nowMs();
  let distrusted = false;

  /**
   * One tick of the check. Not judged: a tick measured by NVML anyway (whole cards), and one with
   * no container on the card, whose busy time is something vcuda did not place and no counter of
   * ours could account for (nor is NVML asked then). Growth is credited as the busy sampler
   * credits it (busy-shares.ts: at most the tick per container, the rest carried a bounded
   * while), so a counter cannot read low to its limiter and high here: one jump that would cover
   * a whole window counts for a couple of seconds at most, in both.
   */
  function check(byNvml: boolean, containerCount: number, readings: readonly BusyReading[]): void {
    const nowMs = opts.nowMs();
    const periodMs = nowMs - lastMs;
    const credited = computeBusyShares(baseline, readings, periodMs);
    baseline = credited.baseline;
    lastMs = nowMs;
    if (byNvml || containerCount === 0) return;
    const verdict = guard.observe(periodMs, credited.addedNs, device());
    if (!verdict) return;
    distrusted = verdict.distrusted;
    opts.onCounterCheck?.(verdict);
  }

  const sampleOnce = () => {
    if (distrusted) {
      // Nothing reads the counters any more: their handles close within two ticks.
      regions.closeUnused();
      return nvml.sampleOnce();
    }
    const containers = opts.placement.containersOn(opts.cardIndex);
    const byNvml = tickSensor(containers) === 'nvml';
    try {
      const readings = readBusyCounters(containers, regions);
      check(byNvml, containers.length, readings);
      if (!byNvml && !distrusted) return busy.sampleTick(() => ({ containers, readings }));
    } finally {
      regions.closeUnused();
    }
    return nvml.sampleOnce();
  };
  const periodic = periodicSampler(sampleOnce, opts, regions);
  return {
    sampleOnce,
    start: periodic.start,
    stop() {
      periodic.stop();
      nvml.stop();
      busy.stop();
    },
  };
}

/** The card's sampler over the sensor chosen for it. */
export function createComputeSampler(
  opts: CardSamplerOptions,
  preferred: ComputeSensor = DEFAULT_COMPUTE_SENSOR,
): { sampler: CardSampler; sensor: ComputeSensor; reason: ComputeSensorReason } {
  const { sensor, reason, wholeCardsByNvml } = chooseComputeSensor(opts.source, opts.cardIndex, preferred);
  const sampler =
    sensor === 'nvml'
      ? createCardSampler(opts)
      : wholeCardsByNvml
        ? inProcessWithWholeCards(opts)
        : createBusySampler(opts);
  return { sampler, sensor, reason };
}
