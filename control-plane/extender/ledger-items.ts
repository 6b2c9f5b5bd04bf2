/** What an assignment holds, as the ledger's rows: one per card, shared by bind and the reconcile. */
import { type Assignment, ledgerUseOfGrant, MIB } from '../../contract/index.js';

export type LedgerItem = { container: string; cardUuid: string; core: number; memoryMiB: number };

/**
 * Per card, one item carrying the pod's whole hold there (containers joined in its name):
 * app containers add up, init containers run one at a time, and the card carries the larger.
 * A dynamic MIG grant is an item per memory slice it covers (contract's ledgerUseOfGrant).
 */
export function ledgerItemsOf(a: Assignment): LedgerItem[] {
  const byCard = new Map<
    string,
    { names: string[]; app: { core: number; mem: number }; init: { core: number; mem: number } }
  >();
  for (const c of a.containers) {
    for (const g of c.cards.flatMap((x) => ledgerUseOfGrant({ ...x, memoryMiB: Math.ceil(x.memoryBytes / MIB) }))) {
      const e = byCard.get(g.uuid) ?? { names: [], app: { core: 0, mem: 0 }, init: { core: 0, mem: 0 } };
      e.names.push(c.name);
      const mem = g.memoryMiB;
      if (c.isInit) e.init = { core: Math.max(e.init.core, g.core), mem: Math.max(e.init.mem, mem) };
      else e.app = { core: e.app.core + g.core, mem: e.app.mem + mem };
      byCard.set(g.uuid, e);
    }
  }
  return [...byCard.entries()].map(([cardUuid, e]) => ({
    container: e.names.join(','),
    cardUuid,
    core: Math.max(e.app.core, e.init.core),
    memoryMiB: Math.max(e.app.mem, e.init.mem),
  }));
}
