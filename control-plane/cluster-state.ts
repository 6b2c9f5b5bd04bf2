/**
 * The control plane's in-memory view of Nodes and Pods, fed by watch events (or directly by tests
 * and the simulator) and handed out as immutable ClusterSnapshots. Holds nothing a restart would
 * lose: every value here is derived from Kubernetes objects, so a fresh replica rebuilds it from a list.
 * What a pod holds is the holds module's answer (placement/holds/): its assignment counts only once
 * its signature verified and it matches the pod; a pod whose token is still being verified holds
 * nothing until it is.
 */
import { type Assignment, gpuRequestInputsOf, type QuantityPolicy } from '../contract/index.js';
import type { AssignmentTrust } from './assignment-trust.js';
import {
  type ClusterSnapshot,
  composeNodeSnapshot,
  type InventorySource,
  inventorySourceOf,
  isSameInventorySource,
  type NodeInventoryRead,
  type NodeLike,
  type NodeSnapshot,
  type PodWithStatus,
  readNodeInventory,
} from './placement/cluster-snapshot.js';
import {
  assignmentTokenOf,
  type CardHold,
  isPodHoldingCards,
  isSameHold,
  judgePodHold,
  type PodHoldJudgement,
  type TokenVerdict,
  type UnplacedPod,
  unplacedPodOf,
} from './placement/holds/index.js';
import { SnapshotNodes } from './placement/snapshot-nodes.js';

/** Why capacity may have freed on a node: pending pods refused for capacity should be retried. */
export type CapacityFreed = {
  node: string;
  why: 'pod-ended' | 'assignment-withdrawn' | 'pod-allocated' | 'node-recovered' | 'ledger-released';
  /** The pod that ended (its ledger rows are released) or was allocated (its size stops being pending). */
  pod?: { uid: string; namespace: string; name: string };
};

type PodEntry = {
  pod: PodWithStatus;
  hold: CardHold | undefined;
  /**
   * The verified assignment behind `hold`, with its token and the key generation it verified under,
   * so later updates of the pod need no lookup while the keys stay the same.
   */
  held?: { token: string; assignment: Assignment; generation: number; specInputs?: string };
};

export type ClusterStateOptions = {
  /** Verifies assignment tokens and remembers the verdicts (shared with the binder, which vouches for its own). */
  trust: AssignmentTrust;
  /** How pods' specs are read, to check an assignment grants what its pod asks. */
  quantity: QuantityPolicy;
};

function podKey(pod: PodWithStatus): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

function refOf(pod: PodWithStatus): { uid: string; namespace: string; name: string } {
  return { uid: pod.metadata?.uid ?? '', namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' };
}

/** etcd's revision when it reads as one; undefined for an opaque version, which is never compared. */
function revisionOf(pod: PodWithStatus): bigint | undefined {
  const rv = pod.metadata?.resourceVersion;
  return rv && /^[0-9]{1,19}$/.test(rv) ? BigInt(rv) : undefined;
}

/** Whether `next` is an older copy of the same pod than `stored` (a watch event behind a bind's own write). */
function isStale(stored: PodWithStatus | undefined, next: PodWithStatus): boolean {
  if (!stored || stored.metadata?.uid !== next.metadata?.uid) return false;
  const a = revisionOf(stored);
  const b = revisionOf(next);
  return a !== undefined && b !== undefined && b < a;
}

/** Healthy cards, whole MIG instances and dynamic-MIG cards: more of them is capacity freed. */
function healthyCount(inv: NodeInventoryRead | undefined): number {
  if (!inv || inv.inventoryError) return -1;
  const dynamic = inv.dynamicMig.filter((d) => d.healthy).length;
  return inv.cards.filter((c) => c.healthy).length + inv.migInstances.filter((m) => m.healthy).length + dynamic;
}

export class ClusterState {
  private readonly inventories = new Map<string, NodeInventoryRead>();
  /** What each inventory was read from; an update with the same source is not read again. */
  private readonly inventorySources = new Map<string, InventorySource>();
  private readonly pods = new Map<string, PodEntry>();
  /** Node name -> keys of pods holding cards there. */
  private readonly holdsByNode = new Map<string, Set<string>>();
  /**
   * The shared ledger's holds of pods this view does not count through their own assignment, keyed
   * `ledger:<pod uid>` in `holdsByNode` (pod keys always hold a '/', so the two never meet).
   */
  private readonly ledgerHolds = new Map<string, CardHold>();
  private readonly nodeSnapshots = new Map<string, NodeSnapshot>();
  private version = 0;
  private current: ClusterSnapshot | undefined;
  /** The nodes of the snapshot handed out last, told of every node change so it stays as it was. */
  private published: SnapshotNodes | undefined;
  private readonly listeners = new Set<(e: CapacityFreed) => void>();
  /** Verifications under way, each settling once its pod has been judged again. */
  private readonly verifying = new Set<Promise<void>>();

  constructor(private readonly opts: ClusterStateOptions) {}

  /** The verdicts this view counts by; the binder vouches here for what it signs. */
  get trust(): AssignmentTrust {
    return this.opts.trust;
  }

  /**
   * Resolves once the pods seen so far are judged (every token they carry verified or refused).
   * Verifications that start later are not waited for, so a steady stream of binds cannot hold it.
   */
  async settled(): Promise<void> {
    await Promise.all([...this.verifying]);
  }

  /** The pod's assignment if it holds cards here: verified and matching the pod. */
  heldAssignment(namespace: string, name: string): Assignment | undefined {
    return this.pods.get(`${namespace}/${name}`)?.held?.assignment;
  }

  /** Called whenever capacity may have freed; returns the unsubscribe function. */
  onCapacityFreed(listener: (e: CapacityFreed) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The latest immutable view; the same object until something changes. O(1), however many nodes. */
  snapshot(): ClusterSnapshot {
    if (!this.current) {
      const nodes = new SnapshotNodes(this.nodeSnapshots);
      this.published?.succeededBy(nodes);
      this.published = nodes;
      this.current = Object.freeze({ version: this.version, nodes });
    }
    return this.current;
  }

  pod(namespace: string, name: string): PodWithStatus | undefined {
    return this.pods.get(`${namespace}/${name}`)?.pod;
  }

  /**
   * What holds the cards of `node` now, pod by pod (assumed binds included), with its parsed
   * inventory; undefined for a node not seen. Preemption asks it to weigh each pod's removal.
   */
  holdersOn(
    node: string,
  ): { inventory: NodeInventoryRead; holders: { pod: PodWithStatus; hold: CardHold }[] } | undefined {
    const inventory = this.inventories.get(node);
    if (!inventory) return undefined;
    const holders: { pod: PodWithStatus; hold: CardHold }[] = [];
    for (const key of this.holdsByNode.get(node) ?? []) {
      const entry = this.pods.get(key);
      if (entry?.hold) holders.push({ pod: entry.pod, hold: entry.hold });
    }
    return { inventory, holders };
  }

  /**
   * GPU pods on a node that hold nothing here (placed around vcuda, or refused by the kubelet for
   * it), sorted by node, namespace and name: the dashboard shows them beside the cards.
   */
  unplacedPods(): UnplacedPod[] {
    const out: UnplacedPod[] = [];
    for (const { pod, hold } of this.pods.values()) {
      const isHeld = hold !== undefined || this.ledgerHolds.has(`ledger:${pod.metadata?.uid ?? ''}`);
      const unplaced = unplacedPodOf(pod, this.opts.quantity.names, isHeld);
      if (unplaced) out.push(unplaced);
    }
    const key = (p: UnplacedPod) => `${p.node}\u0000${p.namespace}\u0000${p.pod}`;
    return out.sort((a, b) => key(a).localeCompare(key(b)));
  }

  allPods(): IterableIterator<PodWithStatus> {
    const it = this.pods.values();
    return (function* () {
      for (const e of it) yield e.pod;
    })();
  }

  upsertNode(node: NodeLike): void {
    const name = node.metadata?.name;
    if (!name) return;
    // Most Node updates leave the agent's annotations as they were: the view, the snapshot's
    // version (which the cycle's filter memo and the nodes' card choices are kept by) stay too.
    const source = inventorySourceOf(node);
    if (isSameInventorySource(this.inventorySources.get(name), source)) return;
    const before = this.inventories.get(name);
    const inv = readNodeInventory(node);
    this.inventories.set(name, inv);
    this.inventorySources.set(name, source);
    this.rebuild(name);
    if (before && healthyCount(inv) > healthyCount(before)) this.emit({ node: name, why: 'node-recovered' });
  }

  removeNode(name: string): void {
    this.inventories.delete(name);
    this.inventorySources.delete(name);
    this.published?.recordBefore(name);
    this.nodeSnapshots.delete(name);
    this.touch();
  }

  /**
   * A watch event (or a bind's own write). An event older than the copy held is dropped: the
   * binder stores the pod its patch returned, and an event queued before that patch must not take
   * the cards back. Only a finished pod has ended; an assignment that merely vanished (a rolled-back
   * bind) frees capacity here but leaves the ledger rows to whoever withdrew it.
   */
  upsertPod(pod: PodWithStatus): void {
    if (isStale(this.pods.get(podKey(pod))?.pod, pod)) return;
    this.applyPod(pod, this.judge(pod));
  }

  private applyPod(pod: PodWithStatus, judged: PodHoldJudgement): void {
    const { hold, held } = this.holdOf(pod, judged);
    const before = this.setPod(pod, hold, held);
    if (before?.hold && !hold) {
      const ended = !isPodHoldingCards(pod);
      this.emit(
        ended
          ? { node: before.hold.node, why: 'pod-ended', pod: refOf(pod) }
          : { node: before.hold.node, why: 'assignment-withdrawn' },
      );
    } else if (before?.hold?.pending && hold && !hold.pending) {
      this.emit({ node: hold.node, why: 'pod-allocated', pod: refOf(pod) });
    }
  }

  /**
   * Counts a bind in progress before the API server has it (kube-scheduler's "assume"), so the
   * next filter already sees these cards taken. The watch's next update of the pod replaces it;
   * a failed bind puts the original pod back with `upsertPod`.
   */
  assumePod(pod: PodWithStatus, hold: CardHold): void {
    this.setPod(pod, hold);
  }

  /**
   * The binder signed `token` for the pod it assumed: later copies of the pod carrying that token
   * (the bind's own writes, their watch events) are judged without looking the token up again.
   * Nothing happens when the pod held now is another (deleted or recreated meanwhile).
   */
  recordSigned(pod: PodWithStatus, token: string, assignment: Assignment): void {
    const entry = this.pods.get(podKey(pod));
    if (!entry || entry.pod.metadata?.uid !== pod.metadata?.uid) return;
    entry.held = { token, assignment, generation: this.opts.trust.generation() };
  }

  /**
   * Undoes a failed bind's assume: puts the pod back as the cluster has it. Unlike upsertPod this
   * reports no ended pod: the pod did not end, and its ledger rows (another attempt's, another
   * replica's) must not be released on the strength of this replica's rollback.
   */
  restorePod(pod: PodWithStatus): void {
    const { hold, held } = this.holdOf(pod, this.judge(pod));
    this.setPod(pod, hold, held);
  }

  /**
   * Judges the pod's assignment with the verdicts known now: the one this pod's entry already
   * holds for the same token, else the trust's cache. An unknown token is verified in the
   * background and the pod judged again then, if it is still the copy held.
   */
  private judge(pod: PodWithStatus): PodHoldJudgement {
    const before = this.pods.get(podKey(pod));
    const held = before?.pod.metadata?.uid === pod.metadata?.uid ? before?.held : undefined;
    const mine = held?.generation === this.opts.trust.generation() ? held : undefined;
    const verdictOf = (token: string): TokenVerdict | undefined =>
      mine?.token === token ? { ok: true, assignment: mine.assignment } : this.opts.trust.lookup(token);
    // Most updates of a pod (its Binding, status, the agent's annotations) leave what it asks as
    // it was: its assignment was checked against the same request already, and is not again.
    const isSpecChecked =
      mine?.specInputs !== undefined &&
      mine.token === assignmentTokenOf(pod) &&
      mine.specInputs === gpuRequestInputsOf(pod, this.opts.quantity);
    const judged = judgePodHold(pod, verdictOf, this.opts.quantity, isSpecChecked);
    if (judged.kind === 'unknown') this.verifyLater(pod, judged.token);
    return judged;
  }

  private verifyLater(pod: PodWithStatus, token: string): void {
    const generation = this.opts.trust.generation();
    const judged = this.opts.trust.verify(token).then((verdict) => {
      if (this.pods.get(podKey(pod))?.pod === pod) {
        // Judged with this verdict itself (the cache may have dropped it already), unless the keys
        // changed meanwhile: then afresh, against the new ones.
        const keysKept = generation === this.opts.trust.generation();
        this.applyPod(pod, keysKept ? judgePodHold(pod, () => verdict, this.opts.quantity) : this.judge(pod));
      }
      this.verifying.delete(judged);
    });
    this.verifying.add(judged);
  }

  /** What a judged pod holds; a refused assignment is reported (once per pod and token) and holds nothing. */
  private holdOf(pod: PodWithStatus, judged: PodHoldJudgement): Pick<PodEntry, 'hold' | 'held'> {
    if (judged.kind === 'held') {
      const generation = this.opts.trust.generation();
      const specInputs = gpuRequestInputsOf(pod, this.opts.quantity);
      return {
        hold: judged.hold,
        held: { token: judged.token, assignment: judged.assignment, generation, specInputs },
      };
    }
    if (judged.kind === 'refused') {
      const m = pod.metadata;
      const ref = { namespace: m?.namespace ?? '', name: m?.name ?? '', uid: m?.uid ?? '' };
      this.opts.trust.report({ pod: ref, reason: judged.reason, message: judged.message }, judged.token);
    }
    return { hold: undefined };
  }

  removePod(pod: PodWithStatus): void {
    const key = podKey(pod);
    const before = this.pods.get(key);
    this.pods.delete(key);
    if (!before) return;
    this.moveHold(key, before.hold, undefined);
    if (before.hold) this.emit({ node: before.hold.node, why: 'pod-ended', pod: refOf(before.pod) });
  }

  /** Stores the pod with its hold, moves the hold's count between nodes, and returns the entry it replaced. */
  private setPod(pod: PodWithStatus, hold: CardHold | undefined, held?: PodEntry['held']): PodEntry | undefined {
    const key = podKey(pod);
    const before = this.pods.get(key);
    this.pods.set(key, held ? { pod, hold, held } : { pod, hold });
    this.moveHold(key, before?.hold, hold);
    // Counted through its verified assignment from now on, not its ledger reservation as well. An
    // assumed hold does not replace it: a bind that fails (the pod held by another attempt) rolls back.
    if (held) this.dropLedgerHold(`ledger:${pod.metadata?.uid ?? ''}`);
    return before;
  }

  /**
   * The shared ledger's live holds of this cluster as last read (db/ledger-holds.ts), each with the
   * card hold it makes: those of pods this view counts through their verified assignment are
   * skipped, and this replica's own (`isOwn`) while it counts the pod as assumed by its bind; the
   * rest (another replica's bind in flight, a dead replica's leftover) count on their cards until a
   * later call leaves them out or the pod's verified assignment replaces them.
   */
  setLedgerHolds(
    holds: Iterable<{ podUid: string; namespace: string; pod: string; isOwn: boolean; hold: CardHold }>,
  ): void {
    const next = new Map<string, CardHold>();
    for (const h of holds) {
      const entry = this.pods.get(`${h.namespace}/${h.pod}`);
      const counted = entry?.pod.metadata?.uid === h.podUid && (entry.held || (h.isOwn && entry.hold));
      if (!counted) next.set(`ledger:${h.podUid}`, h.hold);
    }
    for (const key of [...this.ledgerHolds.keys()]) if (!next.has(key)) this.dropLedgerHold(key);
    for (const [key, hold] of next) {
      const before = this.ledgerHolds.get(key);
      this.ledgerHolds.set(key, hold);
      this.moveHold(key, before, hold);
    }
  }

  private dropLedgerHold(key: string): void {
    const before = this.ledgerHolds.get(key);
    if (!before) return;
    this.ledgerHolds.delete(key);
    this.moveHold(key, before, undefined);
    this.emit({ node: before.node, why: 'ledger-released' });
  }

  private moveHold(key: string, from: CardHold | undefined, to: CardHold | undefined): void {
    // Most pod updates (status, a bind's own write seen again) leave what it holds as it was.
    if (isSameHold(from, to)) return;
    if (from) this.holdsByNode.get(from.node)?.delete(key);
    if (to) {
      const set = this.holdsByNode.get(to.node) ?? new Set<string>();
      this.holdsByNode.set(to.node, set);
      set.add(key);
    }
    if (from) this.rebuild(from.node);
    if (to && to.node !== from?.node) this.rebuild(to.node);
  }

  private rebuild(node: string): void {
    const inv = this.inventories.get(node);
    if (!inv) return; // pods on a node not seen yet count once the node arrives
    const holds: CardHold[] = [];
    for (const key of this.holdsByNode.get(node) ?? []) {
      const h = this.pods.get(key)?.hold ?? this.ledgerHolds.get(key);
      if (h) holds.push(h);
    }
    const next = composeNodeSnapshot(inv, holds);
    this.published?.recordBefore(node);
    this.nodeSnapshots.set(node, next);
    this.touch();
  }

  private touch(): void {
    this.version += 1;
    this.current = undefined;
  }

  private emit(e: CapacityFreed): void {
    for (const l of this.listeners) l(e);
  }
}
