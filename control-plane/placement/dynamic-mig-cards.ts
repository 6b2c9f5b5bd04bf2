/**
 * The cards the node agent cuts on demand (dynamic MIG), as placement sees them: which profiles a
 * card may be granted, the spans already taken on its 8 memory slices, and the ledger cards that
 * stand for those slices. Pure over the inventory and the holds.
 *
 * The ledger counts such a card as 8 slice cards (`<parent>/mig-slice-<k>`, contract's
 * mig-placement.ts); a grant holds each slice it covers whole, so two grants that overlap, from
 * two replicas or two clusters, meet the ledger's per-card rule. Compute slices and per-profile
 * instance counts have no rows of their own: a card is offered only when its profile table makes
 * them follow from the slices (every set of non-overlapping legal placements fits the card's
 * compute slices: true of the H100 and H200 tables, where the only placements reaching slice 7 cost
 * less compute than memory), and a profile only when its instance count is at least the number of
 * its placements that fit side by side (1g.10gb+me, one per card over 7 placements, is served only
 * as static instances).
 */
import {
  type CardInventory,
  dynamicMigOffer,
  isDynamicMigCard,
  MIG_MEMORY_SLICES,
  type MigProfileInventory,
  type MigProfileShape,
  migSliceCardUuid,
  migSliceCore,
  parseMigSliceCard,
} from '../../contract/index.js';
import type { MigSpan } from './mig-planner.js';

/** A profile the card may be granted: the planner's shape and the instance's memory. */
export type DynamicMigProfile = MigProfileShape & Readonly<{ memoryMiB: number }>;

/** A dynamic-MIG card as its inventory describes it. */
export type DynamicMigCardRead = Readonly<{
  uuid: string;
  index: number;
  model: string;
  numaNode: number | null;
  healthy: boolean;
  healthReason?: string | undefined;
  /** The profiles it may be granted (see offeredProfiles); empty when refused. */
  profiles: readonly DynamicMigProfile[];
  /** Instances that exist on it now (the agent's, or made by hand: either way taken). */
  instances: readonly MigSpan[];
  /** What each of its slice cards holds in the ledger, all of which a dynamic grant takes (its `mig.sliceMemoryMiB`). */
  sliceMemoryMiB: number;
  /**
   * Every profile the card has, `+me` and refused ones too: in DRA mode kube-scheduler allocates
   * any of them (its counters keep them apart) and the ledger charges their slices.
   */
  allProfiles?: readonly Readonly<{ profile: string; memorySlices: number; memoryMiB: number }>[];
}>;

/** With the spans taken now: instances, and the slices ledger holds keep. */
export type DynamicMigCardSnapshot = DynamicMigCardRead & Readonly<{ taken: readonly MigSpan[]; heldCore: number }>;

/**
 * The profiles the ledger's slice cards can arbitrate on a card, or why none: those whose instance
 * count follows from the slices, and none at all when non-overlapping placements could overspend
 * the card's compute slices (the largest profile's).
 */
export function offeredProfiles(
  profiles: readonly MigProfileInventory[],
): { profiles: DynamicMigProfile[] } | { refusal: string } {
  const offer = dynamicMigOffer(profiles);
  if ('refusal' in offer) return offer;
  return {
    profiles: offer.offered.map((p) => ({
      profile: p.profile,
      computeSlices: p.computeSlices,
      memorySlices: p.memorySlices,
      maxInstances: p.maxInstances,
      placements: p.placements,
      memoryMiB: p.memoryMiB,
    })),
  };
}

/** The dynamic-MIG card's view, or undefined for a card that is not one. */
export function readDynamicMigCard(c: CardInventory): DynamicMigCardRead | undefined {
  if (!isDynamicMigCard(c) || !c.mig) return undefined;
  const offered = offeredProfiles(c.mig.profiles);
  const refusal = 'refusal' in offered ? offered.refusal : undefined;
  const profiles = 'profiles' in offered ? offered.profiles : [];
  // Over every profile: a DRA partition of a profile the extender does not offer holds slices too.
  const perSlice = c.mig.profiles.reduce((m, p) => Math.max(m, Math.ceil(p.memoryMiB / p.memorySlices)), 0);
  return {
    uuid: c.uuid,
    index: c.index,
    model: c.model,
    numaNode: c.numaNode,
    healthy: c.healthy && refusal === undefined,
    ...(c.healthReason || refusal ? { healthReason: c.healthReason ?? refusal } : {}),
    profiles,
    instances: c.mig.instances.map((i) => {
      const shape = c.mig?.profiles.find((p) => p.profileId === i.profileId);
      return {
        profile: i.profile,
        start: i.placement.start,
        size: i.placement.size,
        computeSlices: shape?.computeSlices ?? 0,
      };
    }),
    sliceMemoryMiB: Math.max(perSlice, Math.ceil(c.memoryMiB / MIG_MEMORY_SLICES)),
    allProfiles: c.mig.profiles.map((p) => ({
      profile: p.profile,
      memorySlices: p.memorySlices,
      memoryMiB: p.memoryMiB,
    })),
  };
}

/**
 * The card with what is taken on it: its instances, and every slice a ledger hold keeps that no
 * instance covers (a grant whose instance is not made yet, or another replica's bind in flight),
 * so an instance made for a grant is counted once.
 */
export function withTakenSpans(
  card: DynamicMigCardRead,
  isSliceHeld: (uuid: string) => boolean,
): DynamicMigCardSnapshot {
  const taken: MigSpan[] = [...card.instances];
  let heldCore = 0;
  for (let k = 0; k < MIG_MEMORY_SLICES; k++) {
    if (!isSliceHeld(migSliceCardUuid(card.uuid, k))) continue;
    heldCore += migSliceCore(k);
    if (card.instances.some((i) => k >= i.start && k < i.start + i.size)) continue;
    taken.push({ profile: '', start: k, size: 1, computeSlices: 0 });
  }
  return { ...card, taken, heldCore };
}

/** The slice cards a dynamic-MIG card registers in the ledger, under its index. */
export function sliceLedgerCardsOf(
  card: Pick<DynamicMigCardRead, 'uuid' | 'index' | 'model' | 'sliceMemoryMiB'>,
): { uuid: string; index: number; model: string; memoryMiB: number }[] {
  return Array.from({ length: MIG_MEMORY_SLICES }, (_, k) => ({
    uuid: migSliceCardUuid(card.uuid, k),
    index: card.index,
    model: `${card.model} MIG slice ${k}`,
    memoryMiB: card.sliceMemoryMiB,
  }));
}

/** Whether a ledger card is a dynamic-MIG slice. */
export function isSliceCard(uuid: string): boolean {
  return parseMigSliceCard(uuid) !== undefined;
}
