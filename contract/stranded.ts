/**
 * What "stranded" means wherever capacity is reported (the dashboard, the ledger's fragmentation
 * report, what-if planning): free capacity of one kind on a card that no pod can use, because the
 * card has too little of the other kind left for the smallest ask. Each reader states that
 * smallest ask (the smallest pod seen, a configured memory floor, or 1 for "nothing left at all");
 * the rule is this one.
 */

/** The least core (hundredths) and memory (MiB) a pod asks of one card. */
export type SmallestAsk = Readonly<{ core: number; memoryMiB: number }>;

/** One card's capacity and what is promised on it. */
export type CardUseSummary = Readonly<{ memoryMiB: number; coreUsed: number; memoryUsedMiB: number }>;

/** Whether a card holds something and still has room: the cards fragmentation is about. */
export function isPartlyUsed(card: CardUseSummary): boolean {
  return (card.coreUsed > 0 || card.memoryUsedMiB > 0) && (card.coreUsed < 100 || card.memoryUsedMiB < card.memoryMiB);
}

/**
 * The card's stranded capacity: its free core when its free memory is below the smallest memory
 * ask, its free memory when its free core is below the smallest core ask (0 otherwise; never below 0).
 */
export function strandedOnCard(card: CardUseSummary, smallest: SmallestAsk): { core: number; memoryMiB: number } {
  // An overcommitted card (more promised than it has) has less than nothing free: it strands the
  // other kind, and has none of its own to strand.
  const freeCore = 100 - card.coreUsed;
  const freeMemoryMiB = card.memoryMiB - card.memoryUsedMiB;
  return {
    core: freeMemoryMiB < smallest.memoryMiB ? Math.max(0, freeCore) : 0,
    memoryMiB: freeCore < smallest.core ? Math.max(0, freeMemoryMiB) : 0,
  };
}

/** A card with nothing of one kind left strands the other: the ledger's report uses this floor. */
export const NOTHING_LEFT: SmallestAsk = { core: 1, memoryMiB: 1 };
