/**
 * A check of the in-process sensor against the driver (pure). The busy-ns counters live in each
 * container's own region, so a program can write its own: read low, it would misreport its GPU
 * time (used GPU-hours, the idle report) and teach its limiter that it runs less than it does.
 * NVML's device utilization (the share of time any kernel ran on the card) is the driver's, and no
 * tenant writes it. The counters' sum over a window may run above it (time-sliced tenants each
 * count the other's slices) but never far below: on a real H200 NVML read lone tenants 1.1-1.2x
 * what the counters did (BENCHMARKS.md, "Real GPU"). A gap of `gapBp` or more in `windows`
 * windows in a row means the counters under-report, and the card is measured from NVML instead.
 */

export type CounterGuardOptions = {
  /** Time a window covers (default 10 s): long enough for a counter's steps to average out. */
  windowMs?: number;
  /** The least NVML busy share over the counters' sum that counts against them (default 25 points). */
  gapBp?: number;
  /** Windows in a row with that gap before the counters are no longer trusted (default 3). */
  windows?: number;
};

/** A closed window: the two busy shares it compared, and whether the counters are now distrusted. */
export type CounterGuardVerdict = {
  deviceBp: number;
  countersBp: number;
  /** deviceBp - countersBp, at least 0. */
  unaccountedBp: number;
  strikes: number;
  distrusted: boolean;
};

export type CounterGuard = {
  /**
   * One tick: `periodMs` since the last, the busy ns the counters of the containers on the card
   * grew by over it, and NVML's device busy share now (undefined: no reading, the tick is skipped).
   * Returns the verdict of the window this tick closed, if it closed one.
   */
  observe(periodMs: number, countedNs: number, deviceBp: number | undefined): CounterGuardVerdict | undefined;
};

export const COUNTER_GUARD_DEFAULTS = { windowMs: 10_000, gapBp: 2_500, windows: 3 } as const;

export function createCounterGuard(opts: CounterGuardOptions = {}): CounterGuard {
  const windowMs = opts.windowMs ?? COUNTER_GUARD_DEFAULTS.windowMs;
  const gapBp = opts.gapBp ?? COUNTER_GUARD_DEFAULTS.gapBp;
  const windows = opts.windows ?? COUNTER_GUARD_DEFAULTS.windows;
  let ms = 0;
  let countedNs = 0;
  let deviceBpMs = 0;
  let strikes = 0;
  let distrusted = false;
  return {
    observe(periodMs, grownNs, deviceBp) {
      if (deviceBp === undefined || !(periodMs > 0)) return undefined;
      ms += periodMs;
      countedNs += Math.max(0, grownNs);
      deviceBpMs += Math.max(0, Math.min(10_000, deviceBp)) * periodMs;
      if (ms < windowMs) return undefined;
      const device = deviceBpMs / ms;
      const counters = (countedNs / (ms * 1e6)) * 10_000;
      const unaccounted = Math.max(0, device - counters);
      strikes = unaccounted >= gapBp ? strikes + 1 : 0;
      distrusted ||= strikes >= windows;
      ms = 0;
      countedNs = 0;
      deviceBpMs = 0;
      return {
        deviceBp: Math.round(device),
        countersBp: Math.round(counters),
        unaccountedBp: Math.round(unaccounted),
        strikes,
        distrusted,
      };
    },
  };
}
