/**
 * MIG in the DRA agent: the cards as the slices show them (each in MIG mode with its layout), the
 * partitions Prepare checks results against (each with the instance there, access nodes included),
 * and dynamic MIG (node-agent/mig/dynamic-mig.ts) as Prepare's MigInstanceMaker: an instance is
 * created for a partition, held per claim, and destroyed with its last claim.
 */
import type { AgentLog } from '../agent-log.js';
import type { CardHealth } from '../health.js';
import type { CapMinorOf } from '../mig/cap-minors.js';
import type { DynamicMig } from '../mig/dynamic-mig.js';
import { placementKey } from '../mig/dynamic-mig-checkpoint.js';
import type { MigDevices } from '../mig/mig-devices.js';
import type { MigInstanceMaker, MigPoolDevice } from './claim-mig.js';
import { offeredPartitions, type SliceCard } from './resource-slice.js';

/**
 * The cards as the slices show them: each in MIG mode with its layout as now read (mig.read keeps
 * its instances for Prepare); a card whose layout cannot be read offers no partition until it can.
 */
export function sliceCards(
  health: CardHealth,
  mig: MigDevices,
  pcieRoots: ReadonlyMap<number, string | undefined>,
  log: AgentLog,
): SliceCard[] {
  return health.list().map((c): SliceCard => {
    const pcieRoot = pcieRoots.get(c.index);
    const card: SliceCard = pcieRoot ? { ...c, pcieRoot } : { ...c };
    if (!c.migMode && !c.migDynamic) return card;
    try {
      return { ...card, mig: mig.read(c.index) };
    } catch (err) {
      log.warn({ err, card: c.index }, `reading card ${c.index}'s MIG layout failed; it offers no partition`);
      return { ...card, mig: null };
    }
  });
}

/**
 * The partitions the published slices offer, each with the instance there now (MigDevices, access
 * nodes included): the layouts are read again, since an instance may have come or gone since the
 * slices were written (dynamic MIG's own, for one). A layout that cannot be read throws.
 */
export function migPoolDevices(
  cards: readonly SliceCard[],
  mig: MigDevices,
  migCreatable: boolean,
): Map<string, MigPoolDevice> {
  for (const c of cards) if (c.migMode || c.migDynamic) mig.read(c.index);
  const instances = mig.list();
  return new Map(
    offeredPartitions({ cards, unhealthy: 'taint', migCreatable }).map(({ part, card }) => {
      const instance = instances.find(
        (i) => i.parent.index === card.index && i.profile === part.profile.profile && i.placement.start === part.start,
      );
      const parent = {
        uuid: card.uuid,
        index: card.index,
        minorNumber: card.minorNumber,
        healthy: card.healthy,
        ...(card.healthReason ? { healthReason: card.healthReason } : {}),
      };
      const device: MigPoolDevice = {
        name: part.device,
        profile: part.profile.profile,
        profileId: part.profile.profileId,
        start: part.start,
        size: part.profile.memorySlices,
        parent,
        ...(instance ? { instance } : {}),
      };
      return [part.device, device];
    }),
  );
}

const keyOf = (d: { parentUuid: string; profile: string; start: number }) =>
  placementKey({ cardUuid: d.parentUuid, profile: d.profile, start: d.start });

/**
 * Dynamic MIG (the agent's newDynamicMig over NVML) as Prepare's maker, holders being claim UIDs;
 * reconciled at once against the prepared claims (`isLiveClaim`), so what a crash left half made,
 * or made for a claim that is gone, is destroyed. A kept card out of MIG mode is switched into it
 * at its first Prepare when nothing runs on it.
 */
export function dynamicMigMaker(opts: {
  dynamic: DynamicMig;
  capMinorOf: CapMinorOf;
  isLiveClaim: (uid: string) => boolean;
}): MigInstanceMaker {
  const { dynamic } = opts;
  dynamic.reconcile(opts.isLiveClaim);
  const key = (d: MigPoolDevice) => keyOf({ parentUuid: d.parent.uuid, profile: d.profile, start: d.start });
  return {
    made: (d) => dynamic.intents().some((i) => placementKey(i) === key(d)),
    ensure: (d, holder) => {
      const placement = {
        cardUuid: d.parent.uuid,
        cardIndex: d.parent.index,
        profile: d.profile,
        profileId: d.profileId,
        start: d.start,
        size: d.size,
      };
      const ready = dynamic.ensure(placement, holder);
      const gi = opts.capMinorOf(d.parent.minorNumber, ready.gpuInstanceId);
      const ci = opts.capMinorOf(d.parent.minorNumber, ready.gpuInstanceId, ready.computeInstanceId);
      return {
        uuid: ready.uuid,
        profile: d.profile,
        gpuInstanceId: ready.gpuInstanceId,
        computeInstanceId: ready.computeInstanceId,
        placement: { start: d.start, size: d.size },
        parent: d.parent,
        capMinors: gi === undefined || ci === undefined ? undefined : [gi, ci],
      };
    },
    release: (item, holder) => dynamic.release(keyOf(item), holder),
  };
}
