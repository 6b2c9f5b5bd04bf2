/**
 * A card hold: the core and memory one holder keeps on each card of one node. The snapshot sums
 * holds per card and never asks what made them, so a new kind of holder (a DRA claim's result, a
 * MIG instance, burst memory) is a new `HolderKind` and a function turning its object into holds,
 * beside the pod assignment's (pod-assignment.ts); nothing downstream changes.
 */

/**
 * Every kind of holder the cluster view counts: a pod's verified assignment, and a ledger
 * reservation of a pod the view does not count through its assignment (ledger-reservation.ts).
 */
export type HolderKind = 'pod-assignment' | 'ledger-reservation';

export type CardUse = { core: number; memoryMiB: number };

/** A pod bound here whose containers the node agent has not allocated yet. */
export type PendingAssignment = Readonly<{
  podUid: string;
  pod: string;
  /** The distinct per-container core amounts it waits to be allocated with (see coreAmountsOf). */
  coreAmounts: readonly number[];
  assignedAtMs: number;
}>;

/** What one holder keeps on its node; a holder that keeps nothing has no hold. */
export type CardHold = Readonly<{
  kind: HolderKind;
  node: string;
  /** Card UUID -> what this holder keeps of it. */
  cardUse: ReadonlyMap<string, CardUse>;
  /** Present while the node agent has not allocated the pod yet. */
  pending?: PendingAssignment;
}>;

/** The distinct per-container core amounts of a pod's GPU containers (init ones included), ascending. */
export function coreAmountsOf(perContainerCore: readonly number[]): number[] {
  return [...new Set(perContainerCore)].sort((a, b) => a - b);
}

/**
 * Per card, what one pod holds: containers run side by side, init containers one at a time before
 * them, so a card carries max(sum of app containers, largest init container), as Kubernetes counts.
 */
export function podCardUse(
  containers: readonly { isInit: boolean; cards: readonly { uuid: string; core: number; memoryMiB: number }[] }[],
): Map<string, CardUse> {
  const app = new Map<string, CardUse>();
  const init = new Map<string, CardUse>();
  for (const c of containers) {
    for (const g of c.cards) {
      if (c.isInit) {
        const cur = init.get(g.uuid) ?? { core: 0, memoryMiB: 0 };
        init.set(g.uuid, { core: Math.max(cur.core, g.core), memoryMiB: Math.max(cur.memoryMiB, g.memoryMiB) });
      } else {
        const cur = app.get(g.uuid) ?? { core: 0, memoryMiB: 0 };
        app.set(g.uuid, { core: cur.core + g.core, memoryMiB: cur.memoryMiB + g.memoryMiB });
      }
    }
  }
  for (const [uuid, i] of init) {
    const a = app.get(uuid) ?? { core: 0, memoryMiB: 0 };
    app.set(uuid, { core: Math.max(a.core, i.core), memoryMiB: Math.max(a.memoryMiB, i.memoryMiB) });
  }
  return app;
}

/** Whether two holds count the same on their node (so an update carrying either changes no snapshot). */
export function isSameHold(a: CardHold | undefined, b: CardHold | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.kind !== b.kind || a.node !== b.node || a.cardUse.size !== b.cardUse.size) return false;
  for (const [uuid, u] of a.cardUse) {
    const v = b.cardUse.get(uuid);
    if (!v || v.core !== u.core || v.memoryMiB !== u.memoryMiB) return false;
  }
  const p = a.pending;
  const q = b.pending;
  if (!p || !q) return p === q;
  return (
    p.podUid === q.podUid &&
    p.pod === q.pod &&
    p.assignedAtMs === q.assignedAtMs &&
    p.coreAmounts.length === q.coreAmounts.length &&
    p.coreAmounts.every((c, i) => c === q.coreAmounts[i])
  );
}

/** Milliseconds since the epoch of an ISO-8601 annotation; 0 when absent or unreadable. */
export function parseTimeMs(text: string | undefined): number {
  if (!text) return 0;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : 0;
}
