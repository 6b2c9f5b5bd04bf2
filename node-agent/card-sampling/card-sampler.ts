/**
 * One sampler per card: every period it asks NVML for the card's process utilization since its
 * last look, maps host PIDs to containers, and writes each container's measured share and the
 * card's busy share into the region of every container placed on the card (idle ones get 0, so
 * their limiters and soft neighbours see the truth). Interfaces are declared here, by their user:
 * the NVML binding provides ProcessUtilizationSource, the allocation code ContainerPlacement.
 */
import { type ContainerShares, computeContainerShares, type ProcessUtilizationSample } from './container-shares.js';
import type { CounterGuardOptions, CounterGuardVerdict } from './counter-guard.js';
import { periodicTask } from './periodic-task.js';
import { type ShareSample, writeShareSample } from './region-feedback.js';
import { createRegionHandles, type RegionHandles } from './region-handles.js';

/** The two NVML reads the sampler needs; node-agent/nvml's GpuSource (NVML or fake) fits it as is. */
export interface ProcessUtilizationSource {
  /** Per-process SM utilization samples of card `cardIndex` newer than `sinceUs` (NVML µs). */
  processUtilization(cardIndex: number, sinceUs: number): ProcessUtilizationSample[];
  /** The card's busy share over its last sampling period. */
  utilizationRates(cardIndex: number): { gpuPercent: number };
  /** False where the card has no per-process utilization (MIG): the in-process sensor is used. */
  processUtilizationSupported?(cardIndex: number): boolean;
}

/** A container placed on a card, and where its feedback goes. */
export type ContainerOnCard = {
  /** Stable key, e.g. `podUid/containerId`. */
  key: string;
  regionPath: string;
  /** Index of this card among the container's devices (config record order). */
  deviceIndex: number;
  /**
   * libvcuda does not time this container's launches on this card (a hard 100 % limit: a whole
   * card, nothing to limit), so only NVML can say how busy it keeps the card.
   */
  unmeasured?: boolean;
};

export interface ContainerPlacement {
  /** The containers with a share of card `cardIndex` right now. */
  containersOn(cardIndex: number): readonly ContainerOnCard[];
  /** The container key of a host pid, or null (host processes, other pods). */
  containerOfPid(pid: number): string | null;
}

export type FeedbackWriter = (regionPath: string, deviceIndex: number, sample: ShareSample) => boolean;

export type CardSamplerOptions = {
  cardIndex: number;
  periodMs: number;
  source: ProcessUtilizationSource;
  placement: ContainerPlacement;
  /**
   * Default: `writeShareSample` through the sampler's own region handles, kept open from one
   * period to the next and closed when their container leaves the card or the sampler stops.
   */
  write?: FeedbackWriter;
  nowMs: () => number;
  /**
   * How long NVML must stay silent before the card counts as idle (default 2000 ms). NVML samples
   * every 1/6 s to 1 s and publishes late, so most ticks find nothing new on a busy card; and its
   * whole-percent figures round a light card down to 0, so "utilization 0" alone is not idle.
   */
  idleAfterMs?: number;
  /** Called with each period's result (metrics). */
  onSample?: (shares: ContainerShares, written: number) => void;
  /**
   * The in-process sensor's counters checked against NVML's device utilization (counter-guard.ts),
   * where the card has it: called with each closed window's verdict.
   */
  onCounterCheck?: (verdict: CounterGuardVerdict) => void;
  /** The windows and the gap of that check (defaults: COUNTER_GUARD_DEFAULTS). */
  counterGuard?: CounterGuardOptions;
  /**
   * In-process sensor, where NVML has the card's utilization: publish the card's busy share as the
   * larger of the counters' sum and NVML's device utilization. Off by default: meant for a soft
   * tenant beside time-sliced neighbours, and no real card has judged it yet (native/COMPUTE.md).
   */
  cardBusyFromDevice?: boolean;
  /**
   * Further per-card work on this period (the memory-drift reconciliation), so a card has one
   * NVML poller; runs after the sample, whether or not the sample threw.
   */
  alsoEachPeriod?: () => void;
  onError?: (err: unknown) => void;
};

export type CardSampler = {
  /** One period's work; returns the shares it wrote. */
  sampleOnce(): ContainerShares;
  start(): void;
  /** Stops the period and closes the regions the sampler holds open. */
  stop(): void;
};

const DEFAULT_IDLE_AFTER_MS = 2000;

export function createCardSampler(opts: CardSamplerOptions): CardSampler {
  // NVML timestamps are host µs; start from "now" so the first period is not the whole buffer.
  let lastMs = opts.nowMs();
  let sinceUs = Math.floor(lastMs) * 1000;
  // When NVML last had process samples for this card (local ms); none yet: the card is idle.
  let lastActiveMs = Number.NEGATIVE_INFINITY;
  const idleAfterMs = opts.idleAfterMs ?? DEFAULT_IDLE_AFTER_MS;
  const regions = createRegionHandles();
  const write: FeedbackWriter =
    opts.write ?? ((path, deviceIndex, sample) => writeShareSample(path, deviceIndex, sample, regions.withRegion));

  function sampleOnce(): ContainerShares {
    const samples = opts.source.processUtilization(opts.cardIndex, sinceUs);
    const shares = computeContainerShares(
      samples,
      (pid) => opts.placement.containerOfPid(pid),
      opts.source.utilizationRates(opts.cardIndex).gpuPercent,
      sinceUs,
    );
    // Nothing new from the driver while the card is busy, or was until recently: publish nothing
    // rather than a false 0. The next sample then spans both ticks, and its time and period still
    // tile time for the limiter. A card that is idle as a whole (NVML has had no process samples
    // for idleAfterMs because nothing ran) is measured: every container on it used 0, which is
    // what the idle report looks for.
    const nowMs = opts.nowMs();
    const idle = shares.intervals === 0;
    if (!idle) lastActiveMs = nowMs;
    if (idle && (shares.cardBusyBp > 0 || nowMs - lastActiveMs < idleAfterMs)) return shares;
    // The sample is stamped with the driver's own timestamps, so time and period tile time as NVML
    // stamps its intervals, whenever this tick ran; an idle card's with this tick's time.
    const timeMs = idle ? Math.floor(nowMs) : shares.newestUs / 1000;
    if (idle && timeMs <= lastMs) return shares;
    // An idle card's sample carries no period: the limiter (native/src/limiter.c) then restarts its
    // measuring window instead of folding a 0 into it. NVML publishes a period late, so a tenant
    // that just began launching can look idle for a tick; learning its cost from that 0 would let
    // it run far past its limit. The usage report still reads the 0 (the container used nothing).
    // NVML stamps an interval with its end and publishes it later, so the first samples after an
    // idle tick can be stamped before it: they carry no period either (nothing to tile with).
    const periodMs = idle || timeMs <= lastMs ? 0 : Math.max(1, Math.round(timeMs - lastMs));
    lastMs = timeMs;
    // Only NVML's own stamps move the cursor: an idle tick's time must not hide samples stamped
    // before it that NVML has yet to publish.
    if (!idle) sinceUs = shares.newestUs;
    let written = 0;
    for (const c of opts.placement.containersOn(opts.cardIndex)) {
      const sample: ShareSample = {
        timeMs,
        measuredShareBp: shares.byContainer.get(c.key) ?? 0,
        cardBusyBp: shares.cardBusyBp,
        periodMs,
      };
      if (write(c.regionPath, c.deviceIndex, sample)) written++;
    }
    regions.closeUnused();
    opts.onSample?.(shares, written);
    return shares;
  }

  return periodicSampler(sampleOnce, opts, regions);
}

/**
 * A sampler from its one period's work: runs it every period with `alsoEachPeriod` after it
 * (whether or not the sample threw), and closes the regions it holds when stopped.
 */
export function periodicSampler(
  sampleOnce: () => ContainerShares,
  opts: Pick<CardSamplerOptions, 'periodMs' | 'alsoEachPeriod' | 'onError'>,
  regions: RegionHandles,
): CardSampler {
  const tick = () => {
    try {
      sampleOnce();
    } finally {
      opts.alsoEachPeriod?.();
    }
  };
  const task = periodicTask(tick, opts.periodMs, opts.onError);
  return {
    sampleOnce,
    start: task.start,
    stop() {
      task.stop();
      regions.closeAll();
    },
  };
}
