/**
 * Turns the busy-ns counters libvcuda keeps in each container's region (device block +32, the
 * in-process sensor: native/COMPUTE.md) into the per-container shares and card busy share the
 * NVML path produces (pure). Used on cards where NVML has no per-process utilization (MIG).
 *
 * A container's share of a period is the growth of its counter over the period's wall time. The
 * card's busy share is the sum over the containers placed on it: the sensor sees only libvcuda
 * tenants, which on a shared card (or a shared MIG instance) are all of them. A counter seen for
 * the first time, or one that went backwards (a new region at the same path), only sets the
 * baseline: what it held before says nothing about this period.
 */
import type { ContainerShares } from './container-shares.js';

/** One container's counter as read from its region this period; absent when it has no region yet. */
export type BusyReading = { key: string; busyNs: bigint };

export type BusySharesResult = {
  shares: ContainerShares;
  /** The counters to measure the next period from (containers read this period only). */
  baseline: Map<string, bigint>;
  /** Busy ns all containers added over the period (0: nothing ran, as far as the sensor saw). */
  addedNs: number;
};

const clampBp = (bp: number) => Math.max(0, Math.min(10_000, bp));

export function computeBusyShares(
  baseline: ReadonlyMap<string, bigint>,
  readings: readonly BusyReading[],
  periodMs: number,
): BusySharesResult {
  const byContainer = new Map<string, number>();
  const next = new Map<string, bigint>();
  let addedNs = 0;
  let totalBp = 0;
  for (const r of readings) {
    const before = baseline.get(r.key);
    next.set(r.key, r.busyNs);
    const added = before === undefined || r.busyNs < before ? 0 : Number(r.busyNs - before);
    addedNs += added;
    const bp = periodMs > 0 ? (added / (periodMs * 1e6)) * 10_000 : 0;
    totalBp += bp;
    byContainer.set(r.key, clampBp((byContainer.get(r.key) ?? 0) + bp));
  }
  const shares: ContainerShares = {
    byContainer,
    cardBusyBp: clampBp(totalBp),
    unattributedBp: 0,
    newestUs: 0,
    intervals: addedNs > 0 ? 1 : 0,
  };
  return { shares, baseline: next, addedNs };
}
