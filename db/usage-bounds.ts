/**
 * Which part of a usage sample can be true. A container uses a card only while it holds it, and
 * only once per instant: per (pod, container, card), accepted periods lie inside the allocation's
 * life (reserved until released, or now) and never overlap one another. A sample that claims
 * time already accounted for, or time outside the allocation, is trimmed to what is left, or
 * dropped when nothing is. Pure over plain data, so the bound is proven by a property test.
 */

const DAY_MS = 86_400_000;

/** One container's hold on one card: `[fromMs, toMs)`, `toMs` undefined while it is held. */
export type AllocationLife = { fromMs: number; toMs: number | undefined; namespace: string };

/** A period a sample covers, `[startMs, endMs)`. */
export type Period = { startMs: number; endMs: number };

/** A sample as offered: its period and what it says was used. */
export type OfferedSample = Period & { key: string; smPct: number; memoryUsedMiB: number };

/** What is kept of an offered sample: its period trimmed and split at UTC midnights. */
export type AcceptedPeriod = Period & {
  key: string;
  namespace: string;
  smPct: number;
  memoryUsedMiB: number;
  /** Which offered sample it is of (its index). */
  offered: number;
};

export type SampleVerdict = 'accepted' | 'duplicate' | 'outside-allocation';

/** The life a period overlaps most; several lives of one key (a pod put back) never overlap. */
function lifeOf(lives: readonly AllocationLife[], p: Period, nowMs: number): AllocationLife | undefined {
  let best: AllocationLife | undefined;
  let bestOverlap = 0;
  for (const life of lives) {
    const overlap = Math.min(p.endMs, life.toMs ?? nowMs) - Math.max(p.startMs, life.fromMs);
    if (overlap > bestOverlap) {
      best = life;
      bestOverlap = overlap;
    }
  }
  return best;
}

/**
 * `p` without the time `taken` already covers, when what is left is one interval ending at `p`'s
 * end; undefined when `p`'s end is already covered (a repeat, or a sample from inside another).
 * A jittered timer's next period starts a little before the last ended: only the overlap goes.
 */
function untakenTail(p: Period, taken: readonly Period[]): Period | undefined {
  let startMs = p.startMs;
  for (const t of taken) {
    if (t.startMs < p.endMs && t.endMs >= p.endMs) return undefined;
    if (t.endMs <= p.endMs && t.endMs > startMs) startMs = t.endMs;
  }
  return startMs < p.endMs ? { startMs, endMs: p.endMs } : undefined;
}

/** `p` cut at each UTC midnight, so a day's usage never holds seconds of another day. */
export function splitAtMidnight(p: Period): Period[] {
  const out: Period[] = [];
  let startMs = p.startMs;
  while (startMs < p.endMs) {
    const midnight = (Math.floor(startMs / DAY_MS) + 1) * DAY_MS;
    const endMs = Math.min(p.endMs, midnight);
    out.push({ startMs, endMs });
    startMs = endMs;
  }
  return out;
}

/**
 * Accepts `offered` against the allocations' `lives` and the periods already stored
 * (`stored`, per key), first come first counted. Returns what to store and one verdict per
 * offered sample, in the order given. `stored` is not modified.
 */
export function acceptSamples(
  offered: readonly OfferedSample[],
  lives: ReadonlyMap<string, readonly AllocationLife[]>,
  stored: ReadonlyMap<string, readonly Period[]>,
  nowMs: number,
): { accepted: AcceptedPeriod[]; verdicts: SampleVerdict[] } {
  const taken = new Map<string, Period[]>();
  const accepted: AcceptedPeriod[] = [];
  const verdicts: SampleVerdict[] = [];
  for (const [i, s] of offered.entries()) {
    const life = lifeOf(lives.get(s.key) ?? [], s, nowMs);
    if (!life) {
      verdicts[i] = 'outside-allocation';
      continue;
    }
    const inLife = {
      startMs: Math.max(s.startMs, life.fromMs),
      endMs: Math.min(s.endMs, life.toMs ?? nowMs, nowMs),
    };
    const keyTaken = taken.get(s.key) ?? [...(stored.get(s.key) ?? [])];
    taken.set(s.key, keyTaken);
    const tail = untakenTail(inLife, keyTaken);
    if (!tail) {
      verdicts[i] = 'duplicate';
      continue;
    }
    keyTaken.push(tail);
    verdicts[i] = 'accepted';
    for (const part of splitAtMidnight(tail)) {
      accepted.push({
        ...part,
        key: s.key,
        namespace: life.namespace,
        smPct: s.smPct,
        memoryUsedMiB: s.memoryUsedMiB,
        offered: i,
      });
    }
  }
  return { accepted, verdicts };
}
