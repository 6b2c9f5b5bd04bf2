/**
 * The ledger-reservation holder kind: a hold the shared ledger keeps for a pod this replica's view
 * does not count itself (another replica's bind in flight, a dead replica's leftover, a pod whose
 * Binding the watch has not shown yet). The ledger refuses a reservation on a card these fill, so
 * placement counts them too and sends no bind there. A pod counted through its own assignment is
 * never counted again through its reservation (cluster-state.ts keeps the one).
 */
import type { CardHold, CardUse } from './card-hold.js';

/** The parts of a ledger hold (db/ledger-holds.ts) that make a card hold. */
export type LedgerReservation = {
  node: string;
  cards: readonly { cardUuid: string; core: number; memoryMiB: number }[];
};

/** What the ledger keeps on each card for the pod (its rows there added up). */
export function holdOfLedgerReservation(r: LedgerReservation): CardHold {
  const cardUse = new Map<string, CardUse>();
  for (const c of r.cards) {
    const cur = cardUse.get(c.cardUuid);
    cardUse.set(c.cardUuid, { core: (cur?.core ?? 0) + c.core, memoryMiB: (cur?.memoryMiB ?? 0) + c.memoryMiB });
  }
  return { kind: 'ledger-reservation', node: r.node, cardUse };
}
