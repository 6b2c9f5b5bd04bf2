/**
 * The whole MIG instances this node serves: those of the cards that were in MIG mode when the
 * agent started, as the GpuSource reads them (at start, then at every inventory publication),
 * each with its parent card. The MIG device plugins advertise them and PreStartContainer hands
 * them over. An instance is healthy while its parent card is; a card whose layout cannot be read
 * serves none until it can (nothing is handed over in doubt).
 *
 * Instances the configuration shares (shared-instances.ts) are not whole instances here: they are
 * share targets, served through `vcuda-core`/`vcuda-memory` like small cards (`shareViews`,
 * `shareCardByUuid`), their own core devices named `c<parent>g<gpuInstanceId>-<nn>`.
 *
 * A card kept for dynamic MIG advertises no instance (its instances are made for grants, and none
 * is shared): it advertises, per profile offered on it (contract's dynamicMigOffer), as many
 * devices as that profile has instances side by side on the empty card (`dyn<card>-<profile>-<k>`).
 * The kubelet only counts them; the ledger arbitrates the placements and the grant names the one
 * to make.
 */
import { dynamicMigOffer, mostSideBySide } from '../../contract/index.js';
import type { CardRef, MigDeviceRef, MigDirectory } from '../allocation/ports.js';
import type { CardHealthView, MigDeviceView } from '../device-plugin/device-list.js';
import type { CardMig, MigInstance, MigProfile } from '../nvml/gpu-source.js';
import type { CapMinorOf } from './cap-minors.js';
import type { InstanceIdentity } from './shared-instances.js';

/** What this needs of the cards (the agent's CardHealth): each card now, and word of a health change. */
export interface MigParents {
  list(): readonly (CardRef & { migMode?: boolean; migDynamic?: boolean; numaNode: number | null })[];
  subscribe(listener: () => void): () => void;
}

export type MigDevice = MigDeviceRef & { numaNode: number | null; memoryMiB: number; isShared: boolean };

/** A device of a dynamic card's profile: one of the instances that could be made on it. */
export function dynamicMigDeviceId(cardIndex: number, profile: string, k: number): string {
  return `dyn${cardIndex}-${profile}-${k}`;
}

const DYNAMIC_DEVICE = /^dyn(\d+)-(.+)-(\d+)$/;

/** The instances' identity and the profiles offered: a change of either is news for the device plugins. */
function keyOf(instances: readonly MigInstance[], offered: readonly MigProfile[]): string {
  const ids = instances.map((i) => `${i.uuid}:${i.profile}:${i.gpuInstanceId}:${i.computeInstanceId}`);
  return `${ids.join(',')}|${offered.map((p) => p.profile).join(',')}`;
}

/** A shared instance's core group: its core devices are `c<parent>g<gpuInstanceId>-<nn>`. */
function shareCoreGroup(d: MigDevice): string {
  return `${d.parent.index}g${d.gpuInstanceId}`;
}

export class MigDevices implements MigDirectory {
  private readonly byCard = new Map<number, readonly MigInstance[]>();
  /** The profiles offered on each dynamic card, as its layout was last read. */
  private readonly dynamicProfiles = new Map<number, readonly MigProfile[]>();
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly cards: MigParents,
    private readonly readLayout: (cardIndex: number) => CardMig | null,
    /** The access nodes' minors (cap-minors.ts: the driver's file, or its layout). */
    readonly capMinorOf: CapMinorOf,
    /** Whether an instance is served as shares (the configuration's `mig.shared`). */
    private readonly isShared: (i: InstanceIdentity) => boolean = () => false,
  ) {
    // A parent's health is its instances' health.
    cards.subscribe(() => this.notify());
  }

  /**
   * Reads card `cardIndex`'s MIG layout and keeps its instances (none unless the card was in MIG
   * mode at start and still is, or is kept for dynamic MIG and in MIG mode now) and, for a dynamic
   * card, the profiles it offers; returns the layout, or rethrows the read's error after keeping none.
   */
  read(cardIndex: number): CardMig | null {
    const card = this.cards.list().find((c) => c.index === cardIndex);
    let layout: CardMig | null;
    try {
      layout = this.readLayout(cardIndex);
    } catch (err) {
      this.keep(cardIndex, [], []);
      throw err;
    }
    const served = (card?.migMode || card?.migDynamic) && layout?.mode === 'enabled';
    const offer = card?.migDynamic && layout ? dynamicMigOffer(layout.profiles) : undefined;
    this.keep(cardIndex, served && layout ? layout.instances : [], offer && 'offered' in offer ? offer.offered : []);
    return layout;
  }

  /** Reads every card in MIG mode at start or kept for dynamic MIG; a failed read is reported and serves nothing. */
  readAll(onError: (cardIndex: number, err: unknown) => void): void {
    for (const card of this.cards.list()) {
      if (!card.migMode && !card.migDynamic) continue;
      try {
        this.read(card.index);
      } catch (err) {
        onError(card.index, err);
      }
    }
  }

  /** The whole instances (not shared), each with its parent. */
  list(): MigDevice[] {
    return this.all().filter((d) => !d.isShared);
  }

  /** A whole instance by its MIG UUID; a shared one is not (it is handed over as shares). */
  byUuid(uuid: string): MigDevice | undefined {
    return this.list().find((d) => d.uuid === uuid);
  }

  /** The shared instances as the core and memory plugins count cards: one core group each. */
  shareViews(): CardHealthView[] {
    return this.all()
      .filter((d) => d.isShared)
      .map((d) => ({
        index: d.parent.index,
        coreGroup: shareCoreGroup(d),
        memoryMiB: d.memoryMiB,
        numaNode: d.numaNode,
        healthy: d.parent.healthy,
      }));
  }

  /** A shared instance as the card a share's grant names (`MIG-…`), healthy while its parent is. */
  shareCardByUuid(uuid: string): CardRef | undefined {
    const d = this.all().find((x) => x.isShared && x.uuid === uuid);
    if (!d) return undefined;
    const { healthReason } = d.parent;
    return {
      uuid: d.uuid,
      index: d.parent.index,
      minorNumber: d.parent.minorNumber,
      healthy: d.parent.healthy,
      ...(healthReason ? { healthReason } : {}),
      migShare: { coreGroup: shareCoreGroup(d), capMinors: d.capMinors },
    };
  }

  /** Whether an instance of card `cardIndex` is shared (for the inventory). */
  isSharedInstance(cardIndex: number, i: MigInstance): boolean {
    return this.isShared({ uuid: i.uuid, profile: i.profile, cardIndex, start: i.placement.start });
  }

  private all(): MigDevice[] {
    const out: MigDevice[] = [];
    for (const card of this.cards.list()) {
      for (const i of this.byCard.get(card.index) ?? []) out.push(this.deviceOf(i, card));
    }
    return out;
  }

  /**
   * What the MIG device plugins advertise, each with its parent's health and NUMA node: the whole
   * instances of the static cards, and the devices of the dynamic cards' profiles.
   */
  views(): MigDeviceView[] {
    const out: MigDeviceView[] = this.list()
      .filter((d) => !this.isDynamicCard(d.parent.index))
      .map((d) => ({ uuid: d.uuid, profile: d.profile, healthy: d.parent.healthy, numaNode: d.numaNode }));
    for (const card of this.cards.list()) {
      for (const p of this.dynamicProfiles.get(card.index) ?? []) {
        for (let k = 0; k < mostSideBySide(p); k++) {
          const uuid = dynamicMigDeviceId(card.index, p.profile, k);
          out.push({ uuid, profile: p.profile, healthy: card.healthy, numaNode: card.numaNode });
        }
      }
    }
    return out;
  }

  /** Whether `id` is one of the devices advertised for `profile` (a whole instance, or a dynamic card's device). */
  isDeviceOf(id: string, profile: string): boolean {
    const m = DYNAMIC_DEVICE.exec(id);
    if (!m) {
      const d = this.byUuid(id);
      return d?.profile === profile && !this.isDynamicCard(d.parent.index);
    }
    const [, card, of, k] = m;
    const p = this.dynamicProfiles.get(Number(card))?.find((x) => x.profile === of);
    return of === profile && p !== undefined && Number(k) < mostSideBySide(p);
  }

  /** The profiles advertised (some whole static instance has it, or a dynamic card offers it), sorted. */
  profiles(): string[] {
    return [...new Set(this.views().map((v) => v.profile))].sort();
  }

  private isDynamicCard(cardIndex: number): boolean {
    return this.cards.list().find((c) => c.index === cardIndex)?.migDynamic === true;
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private deviceOf(i: MigInstance, card: ReturnType<MigParents['list']>[number]): MigDevice {
    const parent: CardRef = {
      uuid: card.uuid,
      index: card.index,
      minorNumber: card.minorNumber,
      healthy: card.healthy,
      ...(card.healthReason ? { healthReason: card.healthReason } : {}),
    };
    const gi = this.capMinorOf(card.minorNumber, i.gpuInstanceId);
    const ci = this.capMinorOf(card.minorNumber, i.gpuInstanceId, i.computeInstanceId);
    return {
      uuid: i.uuid,
      profile: i.profile,
      gpuInstanceId: i.gpuInstanceId,
      computeInstanceId: i.computeInstanceId,
      placement: i.placement,
      parent,
      capMinors: gi === undefined || ci === undefined ? undefined : [gi, ci],
      numaNode: card.numaNode,
      memoryMiB: i.memoryMiB,
      isShared:
        !card.migDynamic &&
        this.isShared({ uuid: i.uuid, profile: i.profile, cardIndex: card.index, start: i.placement.start }),
    };
  }

  private keep(cardIndex: number, instances: readonly MigInstance[], offered: readonly MigProfile[]): void {
    const before = keyOf(this.byCard.get(cardIndex) ?? [], this.dynamicProfiles.get(cardIndex) ?? []);
    this.byCard.set(cardIndex, instances);
    this.dynamicProfiles.set(cardIndex, offered);
    if (before !== keyOf(instances, offered)) this.notify();
  }

  private notify(): void {
    for (const l of this.listeners) l();
  }
}
