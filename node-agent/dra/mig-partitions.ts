/**
 * A card in MIG mode as KEP-4815 partitionable devices (pure). The card gets one counter set,
 * `gpu-<index>-counters`, holding what its GPU instances are carved from: `memory-slice-0..7` (1
 * each), `compute-slices` (7 on H100/H200) and `media-extensions` (1: only one `+me` instance per
 * card). Each partition (a profile at one legal placement) is an exclusive device that consumes its
 * memory slices, its compute slices and, for a `+me` profile, the media extension, so kube-scheduler
 * never allocates two partitions that overlap, two `+me` instances, or more compute than the card
 * has. The card itself is not offered while in MIG mode (resource-slice.ts).
 *
 * Which partitions are offered: every existing instance as its own partition (Prepare hands it
 * over); and, on a card kept for dynamic MIG whose instances can be created at Prepare
 * (`creatable`; in MIG mode or not yet), every other profile × placement whose slices no existing
 * instance takes. A placement an instance of another profile holds cannot be served, so it is not
 * offered. Unlike the extender's offer (contract's dynamicMigOffer, which counts memory slices
 * only), `+me` profiles are offered too: the counter set holds the card's one media extension.
 */
import { DRA_MIG_PROFILE_ATTRIBUTE, draMigDeviceName } from '../../contract/index.js';
import type { CardMig, MigInstance, MigProfile } from '../nvml/gpu-source.js';

export type Counter = { value: string };
export type CounterSet = { name: string; counters: Record<string, Counter> };
export type CounterConsumption = { counterSet: string; counters: Record<string, Counter> };

export const COMPUTE_SLICES_COUNTER = 'compute-slices';
export const MEDIA_EXTENSIONS_COUNTER = 'media-extensions';

export function memorySliceCounter(slice: number): string {
  return `memory-slice-${slice}`;
}

export function migCounterSetName(cardIndex: number): string {
  return `gpu-${cardIndex}-counters`;
}

/** A `+me` profile holds the card's one set of media engines (NVDEC, NVJPG, OFA). */
function hasMediaExtensions(profile: MigProfile): boolean {
  return profile.profile.endsWith('+me');
}

/** One partition offered: a profile at a first memory slice, and the instance there if one exists. */
export type MigPartition = {
  device: string;
  cardIndex: number;
  profile: MigProfile;
  start: number;
  instance?: MigInstance;
};

const overlaps = (a: { start: number; size: number }, b: { start: number; size: number }) =>
  a.start < b.start + b.size && b.start < a.start + a.size;

/** The partitions of one card in MIG mode, in profile then placement order. */
export function migPartitionsOf(cardIndex: number, layout: CardMig, creatable: boolean): MigPartition[] {
  const out: MigPartition[] = [];
  for (const profile of layout.profiles) {
    for (const start of profile.placements) {
      const device = draMigDeviceName(cardIndex, profile.profile, start);
      const span = { start, size: profile.memorySlices };
      const instance = layout.instances.find((i) => i.profileId === profile.profileId && i.placement.start === start);
      if (instance) out.push({ device, cardIndex, profile, start, instance });
      else if (creatable && !layout.instances.some((i) => overlaps(i.placement, span)))
        out.push({ device, cardIndex, profile, start });
    }
  }
  return out;
}

/** The card's counter set: every memory slice a placement reaches, its compute slices, its media extension. */
export function migCounterSet(cardIndex: number, layout: CardMig): CounterSet {
  const slices = Math.max(0, ...layout.profiles.flatMap((p) => p.placements.map((s) => s + p.memorySlices)));
  const counters: Record<string, Counter> = {};
  for (let i = 0; i < slices; i++) counters[memorySliceCounter(i)] = { value: '1' };
  counters[COMPUTE_SLICES_COUNTER] = { value: String(Math.max(0, ...layout.profiles.map((p) => p.computeSlices))) };
  if (layout.profiles.some(hasMediaExtensions)) counters[MEDIA_EXTENSIONS_COUNTER] = { value: '1' };
  return { name: migCounterSetName(cardIndex), counters };
}

/** What allocating the partition takes from its card's counter set. */
export function migConsumption(part: MigPartition): CounterConsumption {
  const counters: Record<string, Counter> = {};
  for (let i = part.start; i < part.start + part.profile.memorySlices; i++)
    counters[memorySliceCounter(i)] = { value: '1' };
  counters[COMPUTE_SLICES_COUNTER] = { value: String(part.profile.computeSlices) };
  if (hasMediaExtensions(part.profile)) counters[MEDIA_EXTENSIONS_COUNTER] = { value: '1' };
  return { counterSet: migCounterSetName(part.cardIndex), counters };
}

type Attribute = { string?: string; int?: number };

/** What a claim selects a partition by; `profile` is what tells it from a card. */
export function migAttributes(part: MigPartition, parent: { uuid: string; model: string }): Record<string, Attribute> {
  const p = part.profile;
  return {
    [DRA_MIG_PROFILE_ATTRIBUTE]: { string: p.profile },
    profileId: { int: p.profileId },
    placementStart: { int: part.start },
    placementSize: { int: p.memorySlices },
    computeSlices: { int: p.computeSlices },
    multiprocessors: { int: p.sms },
    memoryMiB: { int: p.memoryMiB },
    parentUUID: { string: parent.uuid },
    parentIndex: { int: part.cardIndex },
    productName: { string: parent.model },
  };
}
