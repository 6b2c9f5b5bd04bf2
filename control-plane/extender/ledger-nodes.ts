/**
 * Which nodes' cards the ledger knows. A reservation names cards, so the ledger must know a
 * node's cards before its first bind; registering them takes a transaction of its own, which on a
 * fresh replica would otherwise land in the first bind of every node at once. So the control
 * plane registers every watched node in the background (at start and on each housekeeping tick),
 * binds only wait for a registration already under way, and concurrent binds to one node share it.
 */
import { MIG_MEMORY_SLICES, migSpanCore } from '../../contract/index.js';
import type { LedgerCard } from '../../db/ledger.js';
import type { NodeSnapshot } from '../placement/cluster-snapshot.js';
import { sliceLedgerCardsOf } from '../placement/dynamic-mig-cards.js';

/** The slice of the ledger (db/ledger.ts) this needs. */
export type NodeRegistrationLedger = {
  upsertNode(cluster: string, node: string, cards: LedgerCard[]): Promise<void>;
};

export class LedgerNodes {
  /** Per node: the card list last sent and that registration's outcome. */
  private readonly known = new Map<string, { cards: readonly LedgerCard[]; done: Promise<void> }>();

  constructor(
    private readonly ledger: NodeRegistrationLedger,
    private readonly cluster: string,
  ) {}

  /** Resolves once the ledger knows this node's current cards (its whole MIG instances among them). */
  ensure(node: NodeSnapshot): Promise<void> {
    const entry = this.known.get(node.name);
    // Every bind asks, on a snapshot rebuilt since the last (its card objects are new): compare
    // the cards' fields, nothing serialised.
    if (entry && isSameCardList(entry.cards, node)) return entry.done;
    const cards = ledgerCardsOf(node);
    const done = this.ledger.upsertNode(this.cluster, node.name, cards).catch((err: unknown) => {
      // Forget a failed registration so the next bind or tick tries again.
      if (this.known.get(node.name)?.done === done) this.known.delete(node.name);
      throw err;
    });
    this.known.set(node.name, { cards, done });
    return done;
  }

  /** Registers every node of a snapshot not yet known, `concurrency` at a time. */
  async ensureAll(
    nodes: Iterable<NodeSnapshot>,
    concurrency = 4,
  ): Promise<{ registered: number; failed: number; firstError?: unknown }> {
    const todo = [...nodes].filter((n) => !n.inventoryError && !this.isKnown(n));
    let next = 0;
    let failed = 0;
    let firstError: unknown;
    const worker = async () => {
      while (next < todo.length) {
        const node = todo[next++] as NodeSnapshot;
        try {
          await this.ensure(node);
        } catch (err) {
          failed += 1;
          firstError ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
    return { registered: todo.length - failed, failed, ...(failed > 0 ? { firstError } : {}) };
  }

  /** Whether the ledger has (or is being sent) exactly this node's cards. */
  private isKnown(node: NodeSnapshot): boolean {
    const entry = this.known.get(node.name);
    return entry !== undefined && isSameCardList(entry.cards, node);
  }
}

type LedgerView = Pick<NodeSnapshot, 'cards' | 'migInstances' | 'dynamicMig'>;

/**
 * What the ledger counts on a node: its cards, and each whole MIG instance as a card of its own
 * (under its parent's index, its memory the instance's), so a pod holding an instance holds all
 * its memory and the ledger's per-card rule (memory within the card's) gives it to one pod only;
 * its core is the part of the parent it spans. A dynamic-MIG card adds its 8 memory slices the same
 * way (dynamic-mig-cards.ts): a grant takes all of each slice's memory, so overlapping placements
 * meet the same rule.
 */
export function ledgerCardsOf(node: LedgerView): LedgerCard[] {
  return [
    // A shared MIG instance's shares are on its own scale: the quota counts them on its card's.
    ...node.cards.map((c) => {
      const quotaWeight = quotaWeightOf(c);
      const card = { uuid: c.uuid, index: c.index, model: c.model, memoryMiB: c.memoryMiB };
      return quotaWeight === undefined ? card : { ...card, quotaWeight };
    }),
    ...node.migInstances.map((m) => ({
      uuid: m.uuid,
      index: m.parentIndex,
      model: `${m.model} MIG ${m.profile}`,
      memoryMiB: m.memoryMiB,
    })),
    ...node.dynamicMig.flatMap(sliceLedgerCardsOf),
  ];
}

function isSameCard(a: LedgerCard, b: LedgerCard): boolean {
  return a.uuid === b.uuid && a.index === b.index && a.model === b.model && a.memoryMiB === b.memoryMiB;
}

/** A card's quota weight as the ledger registers it: a shared MIG instance's span; a card none (100). */
function quotaWeightOf(c: NodeSnapshot['cards'][number]): number | undefined {
  return c.sharedMig ? migSpanCore(c.sharedMig) : undefined;
}

/** A snapshot card against its registration: the same fields, and weighted alike. */
function isSameSnapshotCard(known: LedgerCard, c: NodeSnapshot['cards'][number]): boolean {
  return isSameCard(known, c) && known.quotaWeight === quotaWeightOf(c);
}

/** Whether the node's cards and instances are the ones registered (same fields, in order). */
function isSameCardList(known: readonly LedgerCard[], node: LedgerView): boolean {
  const { cards, migInstances, dynamicMig } = node;
  if (known.length !== cards.length + migInstances.length + dynamicMig.length * MIG_MEMORY_SLICES) return false;
  for (let i = 0; i < cards.length; i++) {
    const b = cards[i] as NodeSnapshot['cards'][number];
    if (!isSameSnapshotCard(known[i] as LedgerCard, b)) return false;
  }
  // Few nodes have instances: these are built only for them.
  if (migInstances.length === 0 && dynamicMig.length === 0) return true;
  const instances = ledgerCardsOf({ cards: [], migInstances, dynamicMig });
  return instances.every((m, i) => isSameCard(known[cards.length + i] as LedgerCard, m));
}
