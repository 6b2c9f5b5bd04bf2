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
 *
 * A counter grows in steps: one timed launch stands for every launch of its marker interval and is
 * added when it completes, so a program that launches rarely adds seconds at once. Growth past the
 * period's length is carried into the next periods instead of clamped away (the baseline advances
 * by what was credited), so the shares add up to what the sensor measured; a clamp read such a
 * program at a fraction of its time and taught the limiter a cost too low. The carry is bounded, so
 * a counter that over-reads cannot build a backlog that outlives the work.
 */
import type { ContainerShares } from './container-shares.js';

/** One container's counter as read from its region this period; absent when it has no region yet. */
export type BusyReading = { key: string; busyNs: bigint };

export type BusySharesResult = {
  shares: ContainerShares;
  /** The counters to measure the next period from (containers read this period only). */
  baseline: Map<string, bigint>;
  /** Busy ns credited to all containers for the period (0: nothing ran, as far as the sensor saw, and nothing was carried). */
  addedNs: number;
};

/** Most busy time a container carries past the period it was added in (a few of the sampler's ticks). */
export const MAX_CARRY_NS = 2_000_000_000n;

const clampBp = (bp: number) => Math.max(0, Math.min(10_000, bp));

export function computeBusyShares(
  baseline: ReadonlyMap<string, bigint>,
  readings: readonly BusyReading[],
  periodMs: number,
): BusySharesResult {
  const byContainer = new Map<string, number>();
  const next = new Map<string, bigint>();
  const periodNs = BigInt(Math.max(0, Math.floor(periodMs * 1e6)));
  let addedNs = 0;
  let totalBp = 0;
  for (const r of readings) {
    const before = baseline.get(r.key);
    if (before === undefined || r.busyNs < before) {
      next.set(r.key, r.busyNs);
      byContainer.set(r.key, byContainer.get(r.key) ?? 0);
      continue;
    }
    const grown = r.busyNs - before;
    const credited = grown < periodNs ? grown : periodNs;
    // What is left over waits for the next periods, up to the bound; past it, it is dropped.
    const carried = grown - credited > MAX_CARRY_NS ? MAX_CARRY_NS : grown - credited;
    next.set(r.key, r.busyNs - carried);
    addedNs += Number(credited);
    const bp = periodMs > 0 ? (Number(credited) / (periodMs * 1e6)) * 10_000 : 0;
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
