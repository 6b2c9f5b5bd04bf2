/**
 * Dynamic MIG's shared names: a placement (card, profile, first memory slice) is what the control
 * plane grants and what the node agent creates and checkpoints, so both sides key it by one
 * definition. The ledger counts a dynamic-MIG card as its 8 memory slices, each a ledger card of
 * its own, so two grants that overlap on one slice meet the ledger's per-card rule.
 *
 * Whichever mode made it, an instance is charged the part of its card its memory slices span, on
 * the card's 100-core scale (migSpanCore), so a team's quota counts a 3g.40gb as half a card. Its
 * holder stays alone on it by memory: a grant takes all of its ledger card's memory.
 */

/** Memory slices of a MIG-capable card (H100, H200): the axis every placement sits on. */
export const MIG_MEMORY_SLICES = 8;

/** Slice `slice`'s part of its card's 100 cores: 13, 12, 13, 12, … so the 8 slices sum to 100. */
export function migSliceCore(slice: number): number {
  return Math.round((100 * (slice + 1)) / MIG_MEMORY_SLICES) - Math.round((100 * slice) / MIG_MEMORY_SLICES);
}

/** The part of its card's 100 cores an instance at memory slices `[start, start + size)` spans. */
export function migSpanCore(p: Readonly<{ start: number; size: number }>): number {
  let core = 0;
  for (let k = p.start; k < p.start + p.size; k++) core += migSliceCore(k);
  return core;
}

/** A placement's key, `<parent GPU UUID>/<profile>@<start>`: the dynamic grant's `uuid` and the node's checkpoint key. */
export function migPlacementKey(p: Readonly<{ parent: string; profile: string; start: number }>): string {
  return `${p.parent}/${p.profile}@${p.start}`;
}

/** The ledger card standing for memory slice `slice` of a dynamic-MIG card. */
export function migSliceCardUuid(parent: string, slice: number): string {
  return `${parent}/mig-slice-${slice}`;
}

/** The memory slices `[start, start + size)` of a placement, as ledger card UUIDs. */
export function migSliceCardsOf(p: Readonly<{ parent: string; start: number; size: number }>): string[] {
  return Array.from({ length: p.size }, (_, k) => migSliceCardUuid(p.parent, p.start + k));
}

const SLICE_CARD = /^(.+)\/mig-slice-([0-7])$/;

/** The parent and slice of a slice card UUID; undefined for any other card. */
export function parseMigSliceCard(uuid: string): { parent: string; slice: number } | undefined {
  const m = SLICE_CARD.exec(uuid);
  return m ? { parent: m[1] as string, slice: Number(m[2]) } : undefined;
}

/** What the offer rule and the planner read of a GPU-instance profile (the inventory's, or the node's NVML). */
export type MigProfileShape = Readonly<{
  profile: string;
  computeSlices: number;
  memorySlices: number;
  maxInstances: number;
  /** First memory slice of every legal placement. */
  placements: readonly number[];
}>;

/** How many placements of one profile fit side by side on an empty card (equal sizes: the earliest that fits). */
export function mostSideBySide(p: Pick<MigProfileShape, 'placements' | 'memorySlices'>): number {
  let end = 0;
  let n = 0;
  for (const s of [...p.placements].sort((a, b) => a - b)) {
    if (s >= end && s + p.memorySlices <= MIG_MEMORY_SLICES) {
      n += 1;
      end = s + p.memorySlices;
    }
  }
  return n;
}

/** The most compute any set of non-overlapping placements of `profiles` takes. */
export function mostComputeSideBySide(profiles: readonly MigProfileShape[]): number {
  const best: number[] = new Array(MIG_MEMORY_SLICES + 1).fill(0);
  for (let s = MIG_MEMORY_SLICES - 1; s >= 0; s--) {
    let b = best[s + 1] as number;
    for (const p of profiles) {
      if (p.placements.includes(s) && s + p.memorySlices <= MIG_MEMORY_SLICES) {
        b = Math.max(b, p.computeSlices + (best[s + p.memorySlices] as number));
      }
    }
    best[s] = b;
  }
  return best[0] as number;
}

/**
 * The profiles a dynamic-MIG card is offered in, or why none: the ledger counts only memory
 * slices, so a profile is offered only when its instance count follows from them (1g.10gb+me, one
 * per card over 7 placements, is not), and no profile when non-overlapping placements could
 * overspend the card's compute slices (the largest profile's). The extender places by it and the
 * node agent's device plugins count by it, so both offer the same profiles.
 */
export function dynamicMigOffer<P extends MigProfileShape>(
  profiles: readonly P[],
): { offered: P[] } | { refusal: string } {
  const offered = profiles.filter((p) => p.maxInstances >= mostSideBySide(p));
  const computeSlices = profiles.reduce((m, p) => Math.max(m, p.computeSlices), 0);
  const most = mostComputeSideBySide(offered);
  if (most > computeSlices) {
    return {
      refusal: `dynamic MIG: placements that do not overlap could take ${most} of its ${computeSlices} compute slices`,
    };
  }
  return { offered };
}

/** A grant as the ledger counts it: a card UUID (or a dynamic placement), its core and memory. */
export type GrantUse = Readonly<{
  uuid: string;
  core: number;
  memoryMiB: number;
  mig?:
    | Readonly<{ parent: string; start: number; size: number; dynamic?: true; sliceMemoryMiB?: number | undefined }>
    | undefined;
}>;

/**
 * The ledger cards a grant holds: its own card; for a static MIG instance (granted whole, core 100
 * on its own scale) its instance card, all its memory, charged the part of the parent card it
 * spans; for a dynamic placement every memory slice it covers, each charged its slice's core and
 * all its memory (the slice memory the grant carries, which its card registers its slices with;
 * a grant from before it carried one, its share of the instance's memory). Bind, the cluster
 * view and the ledger reconcile all count a grant through this, so they agree row for row.
 */
export function ledgerUseOfGrant(g: GrantUse): { uuid: string; core: number; memoryMiB: number }[] {
  if (!g.mig) return [{ uuid: g.uuid, core: g.core, memoryMiB: g.memoryMiB }];
  if (!g.mig.dynamic) return [{ uuid: g.uuid, core: migSpanCore(g.mig), memoryMiB: g.memoryMiB }];
  const perSlice = g.mig.sliceMemoryMiB ?? Math.ceil(g.memoryMiB / g.mig.size);
  const { parent, start, size } = g.mig;
  return Array.from({ length: size }, (_, k) => ({
    uuid: migSliceCardUuid(parent, start + k),
    core: migSliceCore(start + k),
    memoryMiB: perSlice,
  }));
}
