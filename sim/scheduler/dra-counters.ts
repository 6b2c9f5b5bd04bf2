/**
 * Partitionable devices (KEP-4815, beta and on in 1.36) for the simulated allocator, pure: a pool's
 * slices may define counter sets (`sharedCounters`, in slices without devices), and a device may
 * consume counters from them (`consumesCounters`). A device fits only while every counter it
 * consumes has that much left after what the pool's allocated devices consume; a device naming a
 * counter set or counter its pool does not define never fits. Quantities are exact (thousandths).
 */
import { parseDraQuantity } from '../../contract/dra-quantity.js';
import type { ResourceSlice, SliceDevice } from './dra-objects.js';

/** Counter amounts by `<driver>/<pool>/<set>/<counter>`, in thousandths. */
export type CounterAmounts = Map<string, bigint>;

const counterKey = (driver: string, pool: string, set: string, counter: string) =>
  `${driver}/${pool}/${set}/${counter}`;

/** The counters one pool's slices define (its newest generation's slices, as nodeCandidates picks them). */
export function poolCounters(slices: readonly ResourceSlice[]): CounterAmounts {
  const out: CounterAmounts = new Map();
  for (const s of slices) {
    for (const set of s.spec.sharedCounters ?? []) {
      for (const [name, c] of Object.entries(set.counters ?? {})) {
        const q = parseDraQuantity(c.value);
        if (q) out.set(counterKey(s.spec.driver, s.spec.pool.name, set.name, name), q.milli);
      }
    }
  }
  return out;
}

/** What allocating the device takes, by counter key; or why it cannot (a set or counter not defined). */
export function counterDemand(
  c: { driver: string; pool: string; device: SliceDevice },
  available: ReadonlyMap<string, bigint>,
): CounterAmounts | string {
  const demand: CounterAmounts = new Map();
  for (const use of c.device.consumesCounters ?? []) {
    for (const [name, counter] of Object.entries(use.counters ?? {})) {
      const key = counterKey(c.driver, c.pool, use.counterSet, name);
      if (!available.has(key))
        return `device ${c.device.name} consumes counter ${name} of set ${use.counterSet}, which pool ${c.pool} does not define`;
      demand.set(key, (demand.get(key) ?? 0n) + (parseDraQuantity(counter.value)?.milli ?? 0n));
    }
  }
  return demand;
}

/** Why the demand does not fit what is left, or undefined when it does. */
export function counterShortfall(
  device: string,
  demand: ReadonlyMap<string, bigint>,
  used: ReadonlyMap<string, bigint>,
  available: ReadonlyMap<string, bigint>,
): string | undefined {
  for (const [key, want] of demand) {
    const left = (available.get(key) ?? 0n) - (used.get(key) ?? 0n);
    if (want > left)
      return `device ${device} needs counter ${key.split('/').slice(2).join('/')} that allocated devices hold`;
  }
  return undefined;
}

/** Adds (or, with `sign` -1, takes back) a demand to the counters in use. */
export function addCounters(used: CounterAmounts, demand: ReadonlyMap<string, bigint>, sign: 1n | -1n): void {
  for (const [key, n] of demand) used.set(key, (used.get(key) ?? 0n) + sign * n);
}
