/**
 * Dynamic MIG: where to create a GPU instance for a pod whose profile no free instance serves.
 * Pure over the candidate cards (configured for dynamic MIG, their profiles and legal placements,
 * and the spans already taken on their 8 memory slices: instances that exist and the ledger's
 * holds in flight) and the other pending requests the caller knows of.
 *
 * A placement is legal when its memory slices are all free, the card's compute slices are not
 * overspent (two 3g.40gb on an H100 take 6 of its 7 and all 8 memory slices: the seventh compute
 * slice is stranded, which is why compute is counted and not only memory) and the profile's
 * instance count is not reached. Among legal placements the planner takes, in order:
 *  1. the one after which the most other pending requests still fit (never strand what they need
 *     when it can know: a 1g.10gb does not take slice 0 of the only card a pending 7g.80gb fits);
 *  2. best fit across cards: the card left with the fewest free memory slices, so partly used
 *     cards fill up before empty ones are cut;
 *  3. the least fragmentation on the card: the most legal placements (weighted by their size) of
 *     every profile still open afterwards (a lone 1g.10gb goes to slice 6, keeping 0..5 for a 3g
 *     at 0 and a 2g at 4);
 *  4. the lower card index, then the lower start, so replicas agree on ties.
 * Whether the pending requests still fit is judged greedily (largest first, each at its own best
 * placement): exact for the H100/H200 tables' nested placements in every case the tests name, and
 * bounded for long queues.
 */
import type { MigProfileShape } from '../../contract/index.js';

/** A span of memory slices already taken on a card: an instance, or a ledger hold in flight. */
export type MigSpan = Readonly<{ profile: string; start: number; size: number; computeSlices: number }>;

/** A card the planner may cut, as the caller's snapshot and ledger see it. */
export type DynamicMigCard = Readonly<{
  uuid: string;
  index: number;
  profiles: readonly MigProfileShape[];
  taken: readonly MigSpan[];
}>;

/** The planner's choice: a GPU instance of `profile` at `start` on the card. */
export type MigPlacementPlan = Readonly<{
  cardUuid: string;
  cardIndex: number;
  profile: string;
  start: number;
  size: number;
  computeSlices: number;
}>;

export type MigPlanResult = { ok: true; plan: MigPlacementPlan } | { ok: false; message: string };

const MEMORY_SLICES = 8;
/** Pending requests past this many are not weighed (the greedy check is linear in them per candidate). */
const MAX_PENDING_WEIGHED = 32;

/** Compute slices of the whole card: those of its largest profile (7 on an H100). */
function cardComputeSlices(card: DynamicMigCard): number {
  return card.profiles.reduce((m, p) => Math.max(m, p.computeSlices), 0);
}

function overlaps(a: { start: number; size: number }, b: { start: number; size: number }): boolean {
  return a.start < b.start + b.size && b.start < a.start + a.size;
}

/** The legal starts of `shape` on a card with `taken` spans. */
function legalStarts(card: DynamicMigCard, shape: MigProfileShape, taken: readonly MigSpan[]): number[] {
  const computeUsed = taken.reduce((s, t) => s + t.computeSlices, 0);
  if (computeUsed + shape.computeSlices > cardComputeSlices(card)) return [];
  if (taken.filter((t) => t.profile === shape.profile).length >= shape.maxInstances) return [];
  return shape.placements.filter(
    (start) =>
      start + shape.memorySlices <= MEMORY_SLICES &&
      !taken.some((t) => overlaps(t, { start, size: shape.memorySlices })),
  );
}

function spanOf(shape: MigProfileShape, start: number): MigSpan {
  return { profile: shape.profile, start, size: shape.memorySlices, computeSlices: shape.computeSlices };
}

function freeSlices(taken: readonly MigSpan[]): number {
  return MEMORY_SLICES - taken.reduce((s, t) => s + t.size, 0);
}

/** How open a card stays: every profile's legal placements, each weighted by its size. */
function openness(card: DynamicMigCard, taken: readonly MigSpan[]): number {
  return card.profiles.reduce((s, p) => s + p.memorySlices * legalStarts(card, p, taken).length, 0);
}

type Candidate = { card: DynamicMigCard; shape: MigProfileShape; start: number };

/** Every legal placement of `profile` on `cards`, with each card's spans as `takenOf` says. */
function candidatesOf(
  cards: readonly DynamicMigCard[],
  profile: string,
  takenOf: (c: DynamicMigCard) => readonly MigSpan[],
): Candidate[] {
  const out: Candidate[] = [];
  for (const card of cards) {
    const shape = card.profiles.find((p) => p.profile === profile);
    if (!shape) continue;
    for (const start of legalStarts(card, shape, takenOf(card))) out.push({ card, shape, start });
  }
  return out;
}

/** Best fit then least fragmentation then order: rules 2 to 4 above, smaller is better. */
function localRank(c: Candidate, takenOf: (c: DynamicMigCard) => readonly MigSpan[]): number[] {
  const after = [...takenOf(c.card), spanOf(c.shape, c.start)];
  return [freeSlices(after), -openness(c.card, after), c.card.index, c.start];
}

function compareRanks(a: readonly number[], b: readonly number[]): number {
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return (a[k] as number) - (b[k] as number);
  return 0;
}

function bestLocal(cands: Candidate[], takenOf: (c: DynamicMigCard) => readonly MigSpan[]): Candidate | undefined {
  let best: { c: Candidate; rank: number[] } | undefined;
  for (const c of cands) {
    const rank = localRank(c, takenOf);
    if (!best || compareRanks(rank, best.rank) < 0) best = { c, rank };
  }
  return best?.c;
}

/** How many of `pending` still fit, placed greedily largest first, each at its own best placement. */
function pendingThatFit(
  cards: readonly DynamicMigCard[],
  pending: readonly string[],
  start: ReadonlyMap<string, readonly MigSpan[]>,
): number {
  const taken = new Map(start);
  const takenOf = (c: DynamicMigCard) => taken.get(c.uuid) ?? c.taken;
  const sizeOf = (profile: string) =>
    cards.reduce((m, c) => Math.max(m, c.profiles.find((p) => p.profile === profile)?.memorySlices ?? 0), 0);
  const order = [...pending].sort((a, b) => sizeOf(b) - sizeOf(a) || a.localeCompare(b));
  let fit = 0;
  for (const profile of order) {
    const c = bestLocal(candidatesOf(cards, profile, takenOf), takenOf);
    if (!c) continue;
    taken.set(c.card.uuid, [...takenOf(c.card), spanOf(c.shape, c.start)]);
    fit += 1;
  }
  return fit;
}

/** Where to create an instance of `profile`, or why no card here can have one. */
export function planMigPlacement(
  cards: readonly DynamicMigCard[],
  profile: string,
  pending: readonly string[] = [],
): MigPlanResult {
  const takenOf = (c: DynamicMigCard) => c.taken;
  const cands = candidatesOf(cards, profile, takenOf);
  if (cands.length === 0) return { ok: false, message: explainNoPlacement(cards, profile) };
  const weighed = pending.slice(0, MAX_PENDING_WEIGHED);
  let best: { c: Candidate; rank: number[] } | undefined;
  for (const c of cands) {
    const after = new Map([[c.card.uuid, [...c.card.taken, spanOf(c.shape, c.start)]]]);
    const stillFit = weighed.length > 0 ? pendingThatFit(cards, weighed, after) : 0;
    const rank = [-stillFit, ...localRank(c, takenOf)];
    if (!best || compareRanks(rank, best.rank) < 0) best = { c, rank };
  }
  const { c } = best as { c: Candidate };
  return {
    ok: true,
    plan: {
      cardUuid: c.card.uuid,
      cardIndex: c.card.index,
      profile,
      start: c.start,
      size: c.shape.memorySlices,
      computeSlices: c.shape.computeSlices,
    },
  };
}

/** The slices a card has free, as a list of ranges (`4-7`, `6`). */
function freeRanges(taken: readonly MigSpan[]): string {
  const isTaken = (s: number) => taken.some((t) => s >= t.start && s < t.start + t.size);
  const ranges: string[] = [];
  for (let s = 0; s < MEMORY_SLICES; s++) {
    if (isTaken(s)) continue;
    let e = s;
    while (e + 1 < MEMORY_SLICES && !isTaken(e + 1)) e += 1;
    ranges.push(s === e ? `${s}` : `${s}-${e}`);
    s = e;
  }
  return ranges.length === 0 ? 'none' : ranges.join(',');
}

function explainNoPlacement(cards: readonly DynamicMigCard[], profile: string): string {
  if (cards.length === 0) return `no card here is configured for dynamic MIG (asked ${profile})`;
  const offering = cards.filter((c) => c.profiles.some((p) => p.profile === profile));
  if (offering.length === 0) return `no dynamic-MIG card here offers ${profile}`;
  const why = offering.map((c) => `card ${c.index} free memory slices ${freeRanges(c.taken)}`).join('; ');
  return `no free ${profile} placement on a dynamic-MIG card (${why})`;
}
