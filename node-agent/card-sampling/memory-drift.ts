/**
 * The backstop behind libvcuda's memory accounting: per card, NVML's used memory of each
 * container's processes (what the driver really holds for them) against what the container's
 * region says is charged on that card. libvcuda charges a fixed context-overhead estimate and
 * does not see module code or `__device__` globals (native/README.md), so the difference is where
 * the estimate is wrong, or a path the hooks miss. Positive drift: the driver holds memory the
 * limit does not count. Negative: the region charges memory no live process holds.
 *
 * `memoryDrift` is the pure comparison. The monitor runs it on the card sampler's period (no NVML
 * poller of its own, at most once per `periodMs`), exports the drift, counts each container's
 * entry into drift and logs it once per container.
 */
import type { AgentLog } from '../agent-log.js';
import type { RunningProcess } from '../nvml/gpu-source.js';

/** How often a card is reconciled, at most: the sampler ticks faster than memory moves. */
export const MEMORY_DRIFT_PERIOD_MS = 1000;
/** Reconciliations in a row over the threshold before a container counts as drifting. */
export const MEMORY_DRIFT_SUSTAIN_CHECKS = 3;

/** The one NVML read the backstop needs; node-agent/nvml's GpuSource fits it as is. */
export interface RunningProcessSource {
  runningProcesses(cardIndex: number): RunningProcess[] | null;
}

/** A GPU container placed on the card, where its charges are and how its metrics are labelled. */
export type DriftTarget = {
  /** The placement's container key (`podUid/container`). */
  key: string;
  namespace: string;
  pod: string;
  container: string;
  cardUuid: string;
  regionPath: string;
  /** Index of this card among the container's devices (its region's device block). */
  deviceIndex: number;
};

export type ContainerCharge = { key: string; chargedBytes: number };

export type DriftRecord = {
  key: string;
  /** Sum of NVML's `usedGpuMemory` over the container's processes on the card. */
  nvmlUsedBytes: number;
  chargedBytes: number;
  /** `nvmlUsedBytes − chargedBytes`. */
  driftBytes: number;
  /** The container's host pids NVML listed on the card. */
  pids: number[];
};

/**
 * One record per charged container. A container with a process whose memory NVML cannot
 * attribute (MIG, WDDM) gets none: a partial sum would report drift that is not there.
 * Processes of no listed container (host processes, other pods) are not compared.
 */
export function memoryDrift(
  processes: readonly RunningProcess[],
  containerOfPid: (pid: number) => string | null,
  charges: readonly ContainerCharge[],
): DriftRecord[] {
  const used = new Map<string, { bytes: number; pids: number[] } | null>(
    charges.map((c) => [c.key, { bytes: 0, pids: [] }]),
  );
  for (const p of processes) {
    const key = containerOfPid(p.pid);
    if (key === null || !used.has(key)) continue;
    const sum = used.get(key);
    if (!sum) continue;
    if (p.usedGpuMemoryBytes === null) used.set(key, null);
    else {
      sum.bytes += p.usedGpuMemoryBytes;
      sum.pids.push(p.pid);
    }
  }
  return charges.flatMap((c) => {
    const sum = used.get(c.key);
    if (!sum) return [];
    return [
      {
        key: c.key,
        nvmlUsedBytes: sum.bytes,
        chargedBytes: c.chargedBytes,
        driftBytes: sum.bytes - c.chargedBytes,
        pids: sum.pids,
      },
    ];
  });
}

export type DriftState = { overChecks: number; drifting: boolean };

/**
 * One reconciliation's step for one container: a container drifts once |drift| stayed above the
 * threshold for `sustainChecks` reconciliations in a row (an allocation racing the two reads
 * moves one sample, not three), and stops once it is back within. `entered` marks the step
 * that started a drift.
 */
export function nextDriftState(
  prev: DriftState,
  driftBytes: number,
  thresholdBytes: number,
  sustainChecks = MEMORY_DRIFT_SUSTAIN_CHECKS,
): { state: DriftState; entered: boolean } {
  if (Math.abs(driftBytes) <= thresholdBytes) return { state: { overChecks: 0, drifting: false }, entered: false };
  const overChecks = prev.overChecks + 1;
  const drifting = prev.drifting || overChecks >= sustainChecks;
  return { state: { overChecks, drifting }, entered: drifting && !prev.drifting };
}

/** Where the monitor's results go (metrics.ts's AgentMetrics fits it). */
export interface DriftSink {
  setDrift(target: DriftTarget, driftBytes: number): void;
  clearDrift(target: DriftTarget): void;
  driftEntered(target: DriftTarget, driftBytes: number): void;
}

export type MemoryDriftMonitorOptions = {
  cardIndex: number;
  source: RunningProcessSource;
  /** The containers placed on this card now. */
  targets: () => readonly DriftTarget[];
  containerOfPid: (pid: number) => string | null;
  /** Bytes the region at `regionPath` charges on its device `deviceIndex`; 0 when there is no region yet. */
  readCharged: (regionPath: string, deviceIndex: number) => number;
  thresholdBytes: number;
  sink: DriftSink;
  log: Pick<AgentLog, 'warn'>;
  nowMs: () => number;
  periodMs?: number;
  onError?: (err: unknown) => void;
};

export type MemoryDriftMonitor = {
  /** Reconciles when `periodMs` has passed since the last one; never throws. */
  tick(): void;
  /** One reconciliation now; null when NVML cannot list the card's processes. */
  reconcileOnce(): DriftRecord[] | null;
};

function mib(bytes: number): string {
  return `${Math.round(bytes / 2 ** 20)} MiB`;
}

export function createMemoryDriftMonitor(opts: MemoryDriftMonitorOptions): MemoryDriftMonitor {
  const periodMs = opts.periodMs ?? MEMORY_DRIFT_PERIOD_MS;
  const states = new Map<string, DriftState>();
  const logged = new Set<string>();
  let shown: DriftTarget[] = [];
  let lastMs = Number.NEGATIVE_INFINITY;

  /** Containers that left the card, or that NVML could not account for this time, lose their series. */
  function publish(targets: readonly DriftTarget[], records: readonly DriftRecord[]): void {
    const byKey = new Map(records.map((r) => [r.key, r]));
    for (const t of shown) if (!byKey.has(t.key)) opts.sink.clearDrift(t);
    shown = targets.filter((t) => byKey.has(t.key));
    for (const t of shown) opts.sink.setDrift(t, (byKey.get(t.key) as DriftRecord).driftBytes);
    const live = new Set(targets.map((t) => t.key));
    for (const key of states.keys()) if (!live.has(key)) states.delete(key);
    for (const key of logged) if (!live.has(key)) logged.delete(key);
  }

  function judge(target: DriftTarget, r: DriftRecord): void {
    const step = nextDriftState(
      states.get(r.key) ?? { overChecks: 0, drifting: false },
      r.driftBytes,
      opts.thresholdBytes,
    );
    states.set(r.key, step.state);
    if (!step.entered) return;
    opts.sink.driftEntered(target, r.driftBytes);
    if (logged.has(r.key)) return;
    logged.add(r.key);
    opts.log.warn(
      `memory drift: ${target.namespace}/${target.pod}/${target.container} on card ${target.cardUuid}: ` +
        `NVML ${mib(r.nvmlUsedBytes)} (pids ${r.pids.join(',') || 'none'}) vs charged ${mib(r.chargedBytes)}, ` +
        `drift ${r.driftBytes > 0 ? '+' : ''}${mib(r.driftBytes)} beyond ±${mib(opts.thresholdBytes)} ` +
        `(logged once per container; vcuda_container_memory_drift_bytes follows it)`,
    );
  }

  function reconcileOnce(): DriftRecord[] | null {
    const targets = opts.targets();
    const processes = opts.source.runningProcesses(opts.cardIndex);
    if (processes === null) {
      publish(targets, []);
      return null;
    }
    const charges = targets.map((t) => ({ key: t.key, chargedBytes: opts.readCharged(t.regionPath, t.deviceIndex) }));
    const records = memoryDrift(processes, opts.containerOfPid, charges);
    publish(targets, records);
    const byKey = new Map(targets.map((t) => [t.key, t]));
    for (const r of records) judge(byKey.get(r.key) as DriftTarget, r);
    return records;
  }

  return {
    reconcileOnce,
    tick() {
      const now = opts.nowMs();
      if (now - lastMs < periodMs) return;
      lastMs = now;
      try {
        reconcileOnce();
      } catch (err) {
        opts.onError?.(err);
      }
    },
  };
}
