/**
 * The nodes of one ClusterSnapshot without copying the cluster per change: a snapshot reads the
 * cluster's live node map, and a node changed after the snapshot was handed out is remembered as
 * it was, in that snapshot's own `before`. Copying every node per change cost O(nodes) on every
 * bind (a bind changes its node twice); this costs O(1), and the latest snapshot reads the live
 * map directly (one lookup). An older snapshot finds a node in the first `before` of its chain
 * that holds it (its own, then the ones published after it), else in the live map.
 *
 * Snapshots are chained forward only (an old one points at newer ones, never back), so one that
 * nobody holds any more is collected with everything it remembered.
 */
import type { NodeSnapshot } from './cluster-snapshot.js';

export class SnapshotNodes implements ReadonlyMap<string, NodeSnapshot> {
  /** Nodes as they were when this snapshot was handed out, for those changed since (undefined: absent then). */
  private readonly before = new Map<string, NodeSnapshot | undefined>();
  /** The snapshot handed out after this one; undefined while this one is the latest. */
  private next: SnapshotNodes | undefined;
  /** Every node of an older snapshot, built the first time it is iterated (it never changes). */
  private materialized: Map<string, NodeSnapshot> | undefined;

  constructor(private readonly live: ReadonlyMap<string, NodeSnapshot>) {}

  /** The cluster is about to change `name`: remember it as this snapshot saw it (the first change wins). */
  recordBefore(name: string): void {
    if (!this.before.has(name)) this.before.set(name, this.live.get(name));
  }

  /** Hands the recording of later changes over to `next`, the snapshot handed out after this one. */
  succeededBy(next: SnapshotNodes): void {
    this.next = next;
  }

  get(name: string): NodeSnapshot | undefined {
    for (let at: SnapshotNodes | undefined = this; at; at = at.next) {
      if (at.before.size > 0 && at.before.has(name)) return at.before.get(name);
    }
    return this.live.get(name);
  }

  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  get size(): number {
    return this.isLatest() ? this.live.size : this.frozen().size;
  }

  entries(): MapIterator<[string, NodeSnapshot]> {
    return this.current().entries();
  }

  keys(): MapIterator<string> {
    return this.current().keys();
  }

  values(): MapIterator<NodeSnapshot> {
    return this.current().values();
  }

  forEach(fn: (value: NodeSnapshot, key: string, map: ReadonlyMap<string, NodeSnapshot>) => void): void {
    for (const [key, value] of this.current()) fn(value, key, this);
  }

  [Symbol.iterator](): MapIterator<[string, NodeSnapshot]> {
    return this.entries();
  }

  private isLatest(): boolean {
    return this.next === undefined && this.before.size === 0;
  }

  /** What to iterate: a copy, so a change during the iteration cannot show through. */
  private current(): ReadonlyMap<string, NodeSnapshot> {
    return this.isLatest() ? new Map(this.live) : this.frozen();
  }

  private frozen(): Map<string, NodeSnapshot> {
    if (this.materialized && this.next) return this.materialized;
    const names = new Set(this.live.keys());
    for (let at: SnapshotNodes | undefined = this; at; at = at.next)
      for (const name of at.before.keys()) names.add(name);
    const out = new Map<string, NodeSnapshot>();
    for (const name of names) {
      const node = this.get(name);
      if (node) out.set(name, node);
    }
    // Only a snapshot with a successor is final: the latest one may still record changes.
    if (this.next) this.materialized = out;
    return out;
  }
}
