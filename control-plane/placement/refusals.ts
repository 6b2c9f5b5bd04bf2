/**
 * Refusals: the reasons a node cannot take a pod, and the words for the ones both fit paths say
 * (the free-summary shortcut and the walk over the cards), so a pod reads the same message
 * whichever path refused it.
 */

export const refusalReasons = [
  'unknown-node',
  'no-inventory',
  'stale-heartbeat',
  'memory-unit-mismatch',
  'no-matching-card',
  'insufficient-core',
  'insufficient-memory',
  'insufficient-capacity',
  'insufficient-cards',
  'insufficient-mig-instances',
  'single-numa',
] as const;
export type RefusalReason = (typeof refusalReasons)[number];

/** Refusals that capacity freeing up can cure: pods refused for these are nudged when it does. */
export const capacityReasons: ReadonlySet<RefusalReason> = new Set([
  'insufficient-core',
  'insufficient-memory',
  'insufficient-capacity',
  'insufficient-cards',
  'insufficient-mig-instances',
  'single-numa',
]);

export type Refusal = { reason: RefusalReason; message: string };

/**
 * Why no card has room for a share of `core` and `memoryMiB`, given the most core and the most
 * memory free on any one card; undefined when neither alone falls short (the room may still be
 * split across cards, which only the walk over the cards can tell).
 */
export function shareShortfall(
  core: number,
  memoryMiB: number,
  bestCore: number,
  bestMem: number,
): Refusal | undefined {
  const coreShort = bestCore < core;
  const memShort = bestMem < memoryMiB;
  if (coreShort && memShort) {
    return {
      reason: 'insufficient-capacity',
      message: `no card with ${core} core and ${memoryMiB} MiB free; best has ${bestCore} core and ${bestMem} MiB`,
    };
  }
  if (memShort) {
    return { reason: 'insufficient-memory', message: `no card with ${memoryMiB} MiB free; best has ${bestMem} MiB` };
  }
  if (coreShort)
    return { reason: 'insufficient-core', message: `no card with ${core} core free; best has ${bestCore}` };
  return undefined;
}

/** A request for `wanted` whole cards on a node with only `free` entirely free ones. */
export function tooFewWholeCards(wanted: number, free: number): Refusal {
  // Filter says this of many nodes per call, always among a few values: shared, not rebuilt.
  return TOO_FEW_WHOLE_CARDS[wanted]?.[free] ?? tooFewWholeCardsAnew(wanted, free);
}

function tooFewWholeCardsAnew(wanted: number, free: number): Refusal {
  return {
    reason: 'insufficient-cards',
    message: `needs ${wanted} entirely free card${wanted > 1 ? 's' : ''}; ${free} free`,
  };
}

/** [wanted][free] for nodes of up to 16 cards; frozen, since every caller shares them. */
const TOO_FEW_WHOLE_CARDS: readonly (readonly Refusal[])[] = Array.from({ length: 17 }, (_, wanted) =>
  Array.from({ length: wanted }, (_, free) => Object.freeze(tooFewWholeCardsAnew(wanted, free))),
);
