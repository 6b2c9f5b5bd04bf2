/**
 * The immutable view of the cluster that every placement decision reads: per node, its cards with
 * the core and memory already promised to pods, the links between cards, and the pending
 * assignments (bound, not yet allocated by the node agent). Built from Kubernetes objects by pure
 * functions, so tests construct it from plain objects and the watch cache rebuilds it after a restart.
 */
import {
  type CardInventory,
  type CardLink,
  isDynamicMigCard,
  MIG_MEMORY_SLICES,
  migSliceCardsOf,
  migSpanCore,
  nodeInventorySchema,
  type PodLike,
  servedAsMigOnly,
  vcudaAnnotations,
} from '../../contract/index.js';
import {
  type DynamicMigCardRead,
  type DynamicMigCardSnapshot,
  readDynamicMigCard,
  withTakenSpans,
} from './dynamic-mig-cards.js';
import { type CardHold, type CardUse, type PendingAssignment, parseTimeMs } from './holds/index.js';

export type CardSnapshot = Readonly<{
  uuid: string;
  index: number;
  model: string;
  memoryMiB: number;
  numaNode: number | null;
  healthy: boolean;
  healthReason?: string | undefined;
  /** Whether libvcuda serves memory bursts on it (the inventory's memoryBurst); undefined: not said. */
  memoryBurst?: boolean | undefined;
  /**
   * A shared MIG instance (its `MIG-` UUID is `uuid`, `index` its parent's): it serves shares like
   * a small card (core 100 = its compute, its memory the instance's), never whole; `start` and
   * `size` are its placement on the parent's 8 memory slices. Absent: a card.
   */
  sharedMig?: Readonly<{ parentUuid: string; profile: string; start: number; size: number }> | undefined;
  /** Hundredths of the card already promised to pods. */
  usedCore: number;
  usedMemoryMiB: number;
}>;

/**
 * A whole MIG instance that exists on a card in MIG mode (the inventory's `mig.instances`): placed
 * like a card, held whole by one pod at a time. Its parent card is not offered (MIG_ONLY_REASON).
 */
export type MigInstanceSnapshot = Readonly<{
  /** `MIG-…`: what the grant, the holds and the ledger name it by. */
  uuid: string;
  parentUuid: string;
  parentIndex: number;
  /** The parent card's model. */
  model: string;
  numaNode: number | null;
  /** NVIDIA's profile name (`3g.40gb`). */
  profile: string;
  /** First memory slice of its placement, and how many of the card's 8 it spans. */
  start: number;
  size: number;
  memoryMiB: number;
  /** The parent card's health. */
  healthy: boolean;
  healthReason?: string | undefined;
  /** What its holder keeps (the part of the card it spans and all its memory when held, 0 when free). */
  usedCore: number;
  usedMemoryMiB: number;
}>;

/**
 * A share's core on a shared MIG instance, on its card's scale: core 100 is the whole instance,
 * which is the part of the card its slices span.
 */
export function sharedMigCore(sharedMig: Readonly<{ start: number; size: number }>, core: number): number {
  return (core * migSpanCore(sharedMig)) / 100;
}

export type NodeSnapshot = Readonly<{
  name: string;
  cards: readonly CardSnapshot[];
  /** The whole MIG instances of its cards in MIG mode, by parent index and placement. */
  migInstances: readonly MigInstanceSnapshot[];
  /** Its dynamic-MIG cards, with the spans taken on each (dynamic-mig-cards.ts). */
  dynamicMig: readonly DynamicMigCardSnapshot[];
  /** links[i][j] between cards[i] and cards[j]. */
  links: readonly (readonly CardLink[])[];
  /** Latest heartbeat (ms since epoch); 0 when none was ever seen. */
  heartbeatMs: number;
  /** MiB per vcuda-memory unit the node agent advertises with (0 when unknown). */
  memoryUnitMiB: number;
  /** Set when the inventory annotation is missing or malformed: the node is unusable for vcuda. */
  inventoryError?: string;
  pending: readonly PendingAssignment[];
  /**
   * Over healthy cards: the most core and memory free on any one card, how many are entirely
   * free (a shared MIG instance never counts: it serves shares only), and the memory every one of
   * them has (0 when they differ), so most nodes are decided without walking their cards.
   */
  free: Readonly<{
    healthyCards: number;
    maxCore: number;
    maxMemoryMiB: number;
    wholeCards: number;
    uniformMemoryMiB: number;
  }>;
  /** Indexes of the healthy cards, in card order. */
  healthyIndexes: readonly number[];
  /**
   * The healthy cards' free core and free memory (MiB), flat and in card order: core, memory,
   * core, memory... Filter asks every offered node whether one card has room for a share; this
   * answers it from one array instead of a card object per card.
   */
  healthyFree: readonly number[];
  /** Over all cards, for scoring without walking them. */
  totals: Readonly<{ cards: number; usedCore: number; usedMemoryMiB: number; memoryMiB: number }>;
}>;

export type ClusterSnapshot = Readonly<{
  /** Grows with every change, so results computed on one snapshot can be reused while it holds. */
  version: number;
  nodes: ReadonlyMap<string, NodeSnapshot>;
}>;

/** The parts of a Kubernetes Node vcuda reads. */
export type NodeLike = { metadata?: { name?: string; annotations?: Record<string, string> | null } | null };

/** The parts of a Pod the snapshot reads, on top of what placement reads. */
export type PodWithStatus = PodLike & {
  metadata?: PodLike['metadata'] & { deletionTimestamp?: unknown; resourceVersion?: string };
  status?: { phase?: string } | null;
};

/** A node's inventory annotation, parsed once per change (the watch cache keeps it between pod updates). */
export type NodeInventoryRead = Readonly<{
  name: string;
  cards: readonly Omit<CardSnapshot, 'usedCore' | 'usedMemoryMiB'>[];
  migInstances: readonly Omit<MigInstanceSnapshot, 'usedCore' | 'usedMemoryMiB'>[];
  dynamicMig: readonly DynamicMigCardRead[];
  links: readonly (readonly CardLink[])[];
  heartbeatMs: number;
  /** MiB per vcuda-memory unit on this node (0 when unknown). */
  memoryUnitMiB: number;
  inventoryError?: string;
}>;

/** Why a healthy card in MIG mode is not offered whole or as shares. */
export const MIG_ONLY_REASON = 'in MIG mode: served only as MIG instances';

/**
 * Everything `readNodeInventory` reads of a Node: its name and the agent's two annotations. Two
 * Nodes with the same source read alike, so an update that leaves it as it was (the kubelet's
 * status, labels, other controllers' annotations) changes nothing vcuda counts.
 */
export type InventorySource = { name: string; inventory: string | undefined; heartbeat: string | undefined };

export function inventorySourceOf(node: NodeLike): InventorySource {
  const annotations = node.metadata?.annotations ?? {};
  return {
    name: node.metadata?.name ?? '',
    inventory: annotations[vcudaAnnotations.inventory],
    heartbeat: annotations[vcudaAnnotations.heartbeat],
  };
}

export function isSameInventorySource(a: InventorySource | undefined, b: InventorySource): boolean {
  return a !== undefined && a.name === b.name && a.inventory === b.inventory && a.heartbeat === b.heartbeat;
}

export function readNodeInventory(node: NodeLike): NodeInventoryRead {
  const name = node.metadata?.name ?? '';
  const annotations = node.metadata?.annotations ?? {};
  const raw = annotations[vcudaAnnotations.inventory];
  const heartbeatAnnotationMs = parseTimeMs(annotations[vcudaAnnotations.heartbeat]);
  const unusable = (inventoryError: string): NodeInventoryRead => ({
    name,
    cards: [],
    migInstances: [],
    dynamicMig: [],
    links: [],
    heartbeatMs: heartbeatAnnotationMs,
    memoryUnitMiB: 0,
    inventoryError,
  });
  if (!raw) return unusable('no vcuda inventory (is the node agent running?)');
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return unusable('vcuda inventory is not JSON');
  }
  const parsed = nodeInventorySchema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    return unusable(
      `vcuda inventory is malformed (${first ? `${first.path.join('.') || '(root)'}: ${first.message}` : 'invalid'})`,
    );
  }
  const inv = parsed.data;
  return {
    name,
    cards: [
      ...inv.cards.map((c) => ({
        uuid: c.uuid,
        index: c.index,
        model: c.model,
        memoryMiB: c.memoryMiB,
        numaNode: c.numaNode,
        // A card in MIG mode is served only as its MIG instances: never whole, never as shares.
        healthy: c.healthy && !servedAsMigOnly(c),
        ...(c.healthReason ? { healthReason: c.healthReason } : {}),
        ...(c.healthy && servedAsMigOnly(c) ? { healthReason: MIG_ONLY_REASON } : {}),
        ...(c.memoryBurst === undefined ? {} : { memoryBurst: c.memoryBurst }),
      })),
      ...sharedMigCardsOf(inv.cards),
    ],
    migInstances: migInstancesOf(inv.cards),
    dynamicMig: inv.cards.flatMap((c) => readDynamicMigCard(c) ?? []),
    links: inv.links,
    heartbeatMs: Math.max(heartbeatAnnotationMs, parseTimeMs(inv.heartbeat)),
    memoryUnitMiB: inv.memoryUnitMiB,
  };
}

/**
 * The shared instances of the cards in MIG mode, as cards after the node's own (so `links`, which
 * is indexed by the inventory's cards, never reaches them: they are never placed whole).
 */
function sharedMigCardsOf(cards: readonly CardInventory[]): NodeInventoryRead['cards'] {
  return cards.flatMap((c) =>
    servedAsMigOnly(c) && !isDynamicMigCard(c)
      ? (c.mig?.instances ?? [])
          .filter((i) => i.shared)
          .sort((a, b) => a.placement.start - b.placement.start)
          .map((i) => ({
            uuid: i.uuid,
            index: c.index,
            model: `${c.model} MIG ${i.profile}`,
            memoryMiB: i.memoryMiB,
            numaNode: c.numaNode,
            healthy: c.healthy,
            ...(c.healthReason ? { healthReason: c.healthReason } : {}),
            sharedMig: { parentUuid: c.uuid, profile: i.profile, ...i.placement },
          }))
      : [],
  );
}

/**
 * The whole (not shared) instances of the cards in MIG mode, in card order, then by placement. A
 * dynamic-MIG card's instances are not among them: each was made for one grant and is never free
 * for another.
 */
function migInstancesOf(cards: readonly CardInventory[]): NodeInventoryRead['migInstances'] {
  const out: Omit<MigInstanceSnapshot, 'usedCore' | 'usedMemoryMiB'>[] = [];
  for (const c of cards) {
    if (!servedAsMigOnly(c) || isDynamicMigCard(c)) continue;
    const instances = [...(c.mig?.instances ?? [])]
      .filter((i) => !i.shared)
      .sort((a, b) => a.placement.start - b.placement.start);
    for (const i of instances) {
      out.push({
        uuid: i.uuid,
        parentUuid: c.uuid,
        parentIndex: c.index,
        model: c.model,
        numaNode: c.numaNode,
        profile: i.profile,
        start: i.placement.start,
        size: i.placement.size,
        memoryMiB: i.memoryMiB,
        healthy: c.healthy,
        ...(c.healthReason ? { healthReason: c.healthReason } : {}),
      });
    }
  }
  return out;
}

/** What the holds on one node use of each card (and instance or slice), and the assignments still pending. */
function holdsOnNode(
  node: string,
  holds: Iterable<CardHold>,
): { used: Map<string, CardUse>; pending: PendingAssignment[] } {
  const used = new Map<string, CardUse>();
  const pending: PendingAssignment[] = [];
  for (const hold of holds) {
    if (hold.node !== node) continue;
    for (const [uuid, u] of hold.cardUse) {
      const cur = used.get(uuid);
      used.set(uuid, cur ? { core: cur.core + u.core, memoryMiB: cur.memoryMiB + u.memoryMiB } : u);
    }
    if (hold.pending) pending.push(hold.pending);
  }
  return { used, pending };
}

/** One node's snapshot from its parsed inventory and the holds on its cards (see holds/). */
export function composeNodeSnapshot(inv: NodeInventoryRead, holds: Iterable<CardHold>): NodeSnapshot {
  const { used, pending } = holdsOnNode(inv.name, holds);
  const free = { healthyCards: 0, maxCore: 0, maxMemoryMiB: 0, wholeCards: 0, uniformMemoryMiB: -1 };
  const healthyIndexes: number[] = [];
  const healthyFree: number[] = [];
  // A shared MIG instance is part of its card, which the totals already count whole.
  const totals = { cards: inv.cards.filter((c) => !c.sharedMig).length, usedCore: 0, usedMemoryMiB: 0, memoryMiB: 0 };
  const cards = inv.cards.map((c, i): CardSnapshot => {
    const u = used.get(c.uuid);
    const card: CardSnapshot = {
      uuid: c.uuid,
      index: c.index,
      model: c.model,
      memoryMiB: c.memoryMiB,
      numaNode: c.numaNode,
      healthy: c.healthy,
      healthReason: c.healthReason,
      memoryBurst: c.memoryBurst,
      ...(c.sharedMig ? { sharedMig: c.sharedMig } : {}),
      usedCore: u?.core ?? 0,
      usedMemoryMiB: u?.memoryMiB ?? 0,
    };
    totals.usedCore += card.sharedMig ? sharedMigCore(card.sharedMig, card.usedCore) : card.usedCore;
    totals.usedMemoryMiB += card.usedMemoryMiB;
    if (!card.sharedMig) totals.memoryMiB += card.memoryMiB;
    if (card.healthy) {
      healthyIndexes.push(i);
      healthyFree.push(Math.max(0, 100 - card.usedCore), Math.max(0, card.memoryMiB - card.usedMemoryMiB));
      free.healthyCards += 1;
      free.maxCore = Math.max(free.maxCore, 100 - card.usedCore);
      free.maxMemoryMiB = Math.max(free.maxMemoryMiB, card.memoryMiB - card.usedMemoryMiB);
      if (card.usedCore === 0 && card.usedMemoryMiB === 0 && !card.sharedMig) free.wholeCards += 1;
      if (free.uniformMemoryMiB === -1) free.uniformMemoryMiB = card.memoryMiB;
      else if (free.uniformMemoryMiB !== card.memoryMiB) free.uniformMemoryMiB = 0;
    }
    return card;
  });
  if (free.uniformMemoryMiB === -1) free.uniformMemoryMiB = 0;
  const migInstances = inv.migInstances.map((m): MigInstanceSnapshot => {
    const u = used.get(m.uuid);
    if (u) {
      // Its card counts in the totals whole: a held instance uses the part of it the instance spans.
      totals.usedCore += migSpanCore(m);
      totals.usedMemoryMiB += u.memoryMiB;
    }
    return { ...m, usedCore: u?.core ?? 0, usedMemoryMiB: u?.memoryMiB ?? 0 };
  });
  const dynamicMig = inv.dynamicMig.map((d) => {
    const card = withTakenSpans(d, (slice) => used.has(slice));
    // Like a held instance: the part of the card its held slices span.
    totals.usedCore += card.heldCore;
    for (const slice of migSliceCardsOf({ parent: d.uuid, start: 0, size: MIG_MEMORY_SLICES })) {
      totals.usedMemoryMiB += used.get(slice)?.memoryMiB ?? 0;
    }
    return card;
  });
  return {
    name: inv.name,
    cards,
    migInstances,
    dynamicMig,
    links: inv.links,
    heartbeatMs: inv.heartbeatMs,
    memoryUnitMiB: inv.memoryUnitMiB,
    ...(inv.inventoryError ? { inventoryError: inv.inventoryError } : {}),
    pending,
    free,
    healthyIndexes,
    healthyFree,
    totals,
  };
}
