/**
 * What `vcuda-core`/`vcuda-memory` serve and a share's grant may name: the node's cards and its
 * shared MIG instances (mig-devices.ts), each instance a small card of its own (core 100 = its
 * compute, its memory the instance's). The core and memory plugins list both, the allocator and
 * the compute samplers look both up by UUID; a change of either is news for the plugins.
 */
import type { CardDirectory, CardRef } from '../allocation/ports.js';
import type { CardHealthView } from '../device-plugin/device-list.js';

interface CardFeed {
  views(): CardHealthView[];
  cardByUuid(uuid: string): CardRef | undefined;
  subscribe(listener: () => void): () => void;
}

interface SharedInstanceFeed {
  shareViews(): CardHealthView[];
  shareCardByUuid(uuid: string): CardRef | undefined;
  subscribe(listener: () => void): () => void;
}

export class ShareTargets implements CardDirectory {
  constructor(
    private readonly cards: CardFeed,
    private readonly instances: SharedInstanceFeed,
  ) {}

  views(): CardHealthView[] {
    return [...this.cards.views(), ...this.instances.shareViews()];
  }

  cardByUuid(uuid: string): CardRef | undefined {
    return this.cards.cardByUuid(uuid) ?? this.instances.shareCardByUuid(uuid);
  }

  subscribe(listener: () => void): () => void {
    const offCards = this.cards.subscribe(listener);
    const offInstances = this.instances.subscribe(listener);
    return () => {
      offCards();
      offInstances();
    };
  }
}
