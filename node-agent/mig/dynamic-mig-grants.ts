/**
 * Dynamic MIG in the agent: a signed dynamic grant's placement (parent card, profile, start) made
 * real at PreStartContainer on a card this node keeps for dynamic MIG, and given back when its pods
 * end. The grant decides the placement; this only checks that it is one of the card's legal ones
 * for a profile offered there (contract's dynamicMigOffer, as the extender placed it) before
 * DynamicMig makes or adopts it. After each change the card's instances are read again, so the
 * handover finds the new `MIG-` device and the inventory shows it.
 */
import { type CardGrant, dynamicMigOffer } from '../../contract/index.js';
import type { DynamicMigMaker } from '../allocation/ports.js';
import type { CardMig } from '../nvml/gpu-source.js';
import { type DynamicMig, DynamicMigError } from './dynamic-mig.js';
import { type MigPlacement, placementKey } from './dynamic-mig-checkpoint.js';
import type { MigParents } from './mig-devices.js';

export type DynamicMigGrantsDeps = {
  mig: DynamicMig;
  cards: Pick<MigParents, 'list'>;
  /** Reads a card's layout again and keeps its instances (the agent's MigDevices.read). */
  reread: (cardIndex: number) => CardMig | null;
  nodeName: string;
};

export class DynamicMigGrants implements DynamicMigMaker {
  constructor(private readonly d: DynamicMigGrantsDeps) {}

  ensure(grant: CardGrant, podUid: string): string {
    const p = this.placementOf(grant);
    const ready = this.d.mig.ensure(p, podUid);
    this.d.reread(p.cardIndex);
    return ready.uuid;
  }

  uuidOf(key: string): string | undefined {
    return this.d.mig.intents().find((i) => i.phase === 'ready' && placementKey(i) === key)?.uuid;
  }

  /**
   * Gives back what pods no longer hold (the last holder gone: the instance is destroyed): at start
   * and in housekeeping, with the pods the API server lists as not finished.
   */
  reconcile(isLivePod: (podUid: string) => boolean): void {
    const cards = new Set(this.d.mig.intents().map((i) => i.cardIndex));
    try {
      this.d.mig.reconcile(isLivePod);
    } finally {
      for (const c of cards) this.d.reread(c);
    }
  }

  /** The grant's placement on this node, checked against the card's profiles as NVML lists them now. */
  private placementOf(g: CardGrant): MigPlacement {
    const m = g.mig;
    if (!m?.dynamic) throw new DynamicMigError('mig-unavailable', `${g.uuid} is not a dynamic MIG grant`);
    const card = this.d.cards.list().find((c) => c.uuid === m.parent);
    if (!card?.migDynamic) {
      throw new DynamicMigError(
        'mig-unavailable',
        `card ${m.parent} is not kept for dynamic MIG on node ${this.d.nodeName}`,
      );
    }
    if (!card.healthy) {
      throw new DynamicMigError('mig-unavailable', `card ${m.parent} is unhealthy (${card.healthReason ?? 'unknown'})`);
    }
    const offer = dynamicMigOffer(this.d.reread(card.index)?.profiles ?? []);
    const profile = 'offered' in offer ? offer.offered.find((p) => p.profile === m.profile) : undefined;
    if (!profile) {
      throw new DynamicMigError('mig-unavailable', `card ${m.parent} offers no dynamic MIG ${m.profile}`);
    }
    if (!profile.placements.includes(m.start) || m.size !== profile.memorySlices) {
      throw new DynamicMigError(
        'mig-unavailable',
        `${g.uuid} (${m.size} slices) is not a legal ${m.profile} placement: starts ${profile.placements.join(', ')}, ${profile.memorySlices} slices`,
      );
    }
    return {
      cardUuid: card.uuid,
      cardIndex: card.index,
      profile: m.profile,
      profileId: profile.profileId,
      start: m.start,
      size: m.size,
    };
  }
}
