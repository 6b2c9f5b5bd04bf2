/**
 * What-if capacity planning: replays a workload trace against a described cluster through the
 * same fit and score code the extender runs (control-plane/placement), with namespace quotas
 * counted as the ledger counts them, and no process, socket or database. A pod no node takes
 * preempts lower-priority placed pods as kube-scheduler would with vcuda's extender (the same
 * card-aware `chooseVictims`), unless its preemptionPolicy is Never; victims leave the replay
 * (their controllers' replacements are not in the trace). Pure: same inputs, same report.
 */
import {
  fieldError,
  isPartlyUsed,
  type QuantityPolicy,
  type SmallestAsk,
  strandedOnCard,
  ValidationError,
  vcudaAnnotations,
} from '../../contract/index.js';
import {
  composeNodeSnapshot,
  type NodeInventoryRead,
  type NodeSnapshot,
  readNodeInventory,
} from '../../control-plane/placement/cluster-snapshot.js';
import { type FitContext, fitPod, type NodePlacement } from '../../control-plane/placement/fit.js';
import type { CardHold } from '../../control-plane/placement/holds/index.js';
import {
  type PlacementPolicy,
  type PlacementRequest,
  readPlacementRequest,
} from '../../control-plane/placement/placement-request.js';
import { scoreNode } from '../../control-plane/placement/score.js';
import { type ClusterSpec, expandNodes, inventoryOf } from '../cluster-spec.js';
import type { PriorityClassSpec, TraceEntry } from '../traces/workload-spec.js';
import { choosePreemption, type NodePods, type PlacedPod } from './preempt-replay.js';
import { type PodPriority, resolveTracePriority } from './trace-priority.js';

export type WhatIfOptions = {
  policy: PlacementPolicy;
  quantity: QuantityPolicy;
  /** The PriorityClasses the trace's pods may name (the workload's `priorityClasses`). */
  priorityClasses?: readonly PriorityClassSpec[];
};

export type WhatIfReport = {
  pods: number;
  invalid: number;
  placed: number;
  quotaRefused: number;
  unplaced: number;
  /** placed / (pods that were valid and within quota). */
  placementRate: number;
  /** Why pods found no node: the most frequent node refusal per pod, counted. */
  unplacedReasons: Record<string, number>;
  invalidExamples: string[];
  cards: number;
  coreCapacity: number;
  coreUsed: number;
  memoryCapacityMiB: number;
  memoryUsedMiB: number;
  /** Free core on partly used cards whose free memory is below the smallest memory any pod asked. */
  strandedCore: number;
  /** Free memory on partly used cards whose free core is below the smallest share any pod asked. */
  strandedMemoryMiB: number;
  /** Pod → node, for placed pods (`namespace/name`), preempted ones included. */
  placements: Record<string, string>;
  /** Pods placed only by preempting others. */
  preemptions: number;
  /** Pods evicted by a preemptor. */
  victims: number;
  /** Victim (`namespace/name`) → the pod that preempted it and the node. */
  preempted: Record<string, { by: string; node: string }>;
};

type Usage = { core: number; memoryMiB: number };

function podUsage(p: NodePlacement): Usage {
  let core = 0;
  let memoryMiB = 0;
  for (const u of p.cardUse.values()) {
    core += u.core;
    memoryMiB += u.memoryMiB;
  }
  return { core, memoryMiB };
}

/** Best node by the extender's score; ties go to the first name, so reports are reproducible. */
function choosePlacement(nodes: Map<string, NodeSnapshot>, req: PlacementRequest, ctx: FitContext) {
  let best: { placement: NodePlacement; score: number } | undefined;
  const refusals = new Map<string, number>();
  for (const node of [...nodes.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    const fit = fitPod(req, node, ctx);
    if (!fit.ok) {
      refusals.set(fit.refusal.reason, (refusals.get(fit.refusal.reason) ?? 0) + 1);
      continue;
    }
    const score = scoreNode(node, fit.placement, req.policy);
    if (!best || score > best.score) best = { placement: fit.placement, score };
  }
  return { best: best?.placement, refusals };
}

export function runWhatIf(cluster: ClusterSpec, trace: readonly TraceEntry[], opts: WhatIfOptions): WhatIfReport {
  // Its nodes are the description's cards whole; MIG instances exist only once a fake driver made them.
  const mig = cluster.nodes.findIndex((g) => g.mig.length > 0);
  if (mig >= 0) {
    const detail = 'what-if planning does not model MIG instances yet; describe those cards without mig';
    throw new ValidationError([fieldError(`nodes[${mig}].mig`, 'whatif-no-mig', detail)], 'cluster');
  }
  const replay = new TraceReplay(cluster, opts, trace.length);
  for (const entry of trace) {
    replay.departBy(entry.arriveAtSeconds);
    replay.arrive(entry);
  }
  return replay.finish();
}

function emptyReport(pods: number): WhatIfReport {
  return {
    pods,
    invalid: 0,
    placed: 0,
    quotaRefused: 0,
    unplaced: 0,
    placementRate: 0,
    unplacedReasons: {},
    invalidExamples: [],
    cards: 0,
    coreCapacity: 0,
    coreUsed: 0,
    memoryCapacityMiB: 0,
    memoryUsedMiB: 0,
    strandedCore: 0,
    strandedMemoryMiB: 0,
    placements: {},
    preemptions: 0,
    victims: 0,
    preempted: {},
  };
}

/**
 * The cluster as the extender's watch cache sees it: each node's snapshot rebuilt with the control
 * plane's own composer from its inventory and the pods it holds.
 */
class HeldNodes {
  readonly snapshots = new Map<string, NodeSnapshot>();
  private readonly inventories: Map<string, NodeInventoryRead>;
  private readonly holds = new Map<string, CardHold[]>();

  constructor(cluster: ClusterSpec, nowMs: number) {
    // Each node is read from the inventory annotation a node agent would publish, as the extender reads it.
    this.inventories = new Map(
      expandNodes(cluster).map((n) => [
        n.name,
        readNodeInventory({
          metadata: {
            name: n.name,
            annotations: {
              [vcudaAnnotations.inventory]: JSON.stringify(inventoryOf(n, cluster.memoryUnitMiB, new Date(nowMs))),
            },
          },
        }),
      ]),
    );
    for (const node of this.inventories.keys()) {
      this.holds.set(node, []);
      this.rebuild(node);
    }
  }

  hold(p: NodePlacement): CardHold {
    const held: CardHold = { kind: 'pod-assignment', node: p.node, cardUse: p.cardUse };
    this.holds.get(p.node)!.push(held);
    this.rebuild(p.node);
    return held;
  }

  /** Each node's inventory with the placed pods holding its cards. */
  withPods(placed: Iterable<PlacedPod>): NodePods[] {
    const byNode = new Map<string, PlacedPod[]>([...this.inventories.keys()].map((n) => [n, []]));
    for (const p of placed) byNode.get(p.hold.node)?.push(p);
    return [...this.inventories.values()].map((inventory) => ({ inventory, pods: byNode.get(inventory.name)! }));
  }

  release(held: CardHold): void {
    this.holds.set(
      held.node,
      this.holds.get(held.node)!.filter((h) => h !== held),
    );
    this.rebuild(held.node);
  }

  private rebuild(node: string): void {
    this.snapshots.set(node, composeNodeSnapshot(this.inventories.get(node)!, this.holds.get(node)!));
  }
}

/** What each namespace's placed pods use, against its quota as the ledger counts it. */
class NamespaceUsage {
  private readonly used = new Map<string, Usage>();

  constructor(private readonly quotas: ClusterSpec['quotas']) {}

  /** Whether `usage` more stays within the namespace's quota (a namespace without one has no limit). */
  fits(namespace: string, usage: Usage): boolean {
    const quota = this.quotas[namespace];
    const used = this.usedBy(namespace);
    return !quota || (used.core + usage.core <= quota.core && used.memoryMiB + usage.memoryMiB <= quota.memoryMiB);
  }

  add(namespace: string, usage: Usage): void {
    const used = this.usedBy(namespace);
    this.used.set(namespace, { core: used.core + usage.core, memoryMiB: used.memoryMiB + usage.memoryMiB });
  }

  remove(namespace: string, usage: Usage): void {
    this.add(namespace, { core: -usage.core, memoryMiB: -usage.memoryMiB });
  }

  private usedBy(namespace: string): Usage {
    return this.used.get(namespace) ?? { core: 0, memoryMiB: 0 };
  }
}

/** A placed pod with a duration gives its cards back when it ends. */
type Departure = { at: number; hold: CardHold; namespace: string; usage: Usage };

/** A placed pod still holding its cards. */
type Running = PlacedPod & { usage: Usage };

type ReadPod = { req: PlacementRequest; priority: PodPriority };

type PodKey = { uid: string; key: string; namespace: string };

/** The trace replayed one arrival at a time; departures are events too. */
class TraceReplay {
  private readonly report: WhatIfReport;
  private readonly nodes: HeldNodes;
  private readonly quotaUse: NamespaceUsage;
  private readonly ctx: FitContext = { nowMs: 0, heartbeatStaleMs: Number.MAX_SAFE_INTEGER };
  private readonly departures: Departure[] = [];
  private readonly running = new Map<CardHold, Running>();
  private readonly smallest: { core: number; memoryMiB: number } = {
    core: Number.POSITIVE_INFINITY,
    memoryMiB: Number.POSITIVE_INFINITY,
  };
  private uid = 0;

  constructor(
    cluster: ClusterSpec,
    private readonly opts: WhatIfOptions,
    pods: number,
  ) {
    this.report = emptyReport(pods);
    this.nodes = new HeldNodes(cluster, this.ctx.nowMs);
    this.quotaUse = new NamespaceUsage(cluster.quotas);
  }

  /** Every pod that has ended by `seconds` gives its cards and quota back. */
  departBy(seconds: number): void {
    this.departures.sort((a, b) => a.at - b.at);
    while (this.departures.length && this.departures[0]!.at <= seconds) {
      const d = this.departures.shift()!;
      this.running.delete(d.hold);
      this.nodes.release(d.hold);
      this.quotaUse.remove(d.namespace, d.usage);
    }
  }

  arrive(entry: TraceEntry): void {
    const pod = { ...entry.pod, metadata: { ...entry.pod.metadata, uid: `whatif-${this.uid++}` } };
    const { namespace } = pod.metadata;
    const key = `${namespace}/${pod.metadata.name}`;
    const read = this.readRequest(pod, key);
    if (!read) return;
    const { best, refusals } = choosePlacement(this.nodes.snapshots, read.req, this.ctx);
    if (best) {
      if (!this.quotaUse.fits(namespace, podUsage(best))) this.report.quotaRefused++;
      else this.admit(entry, { uid: pod.metadata.uid, key, namespace }, read.priority.priority, best);
      return;
    }
    if (!this.preemptFor(entry, { uid: pod.metadata.uid, key, namespace }, read)) this.countUnplaced(refusals);
  }

  /** Places the pod (its quota already judged): cards held, quota counted, its end scheduled. */
  private admit(entry: TraceEntry, who: PodKey, priority: number, placement: NodePlacement): void {
    const usage = podUsage(placement);
    this.quotaUse.add(who.namespace, usage);
    const hold = this.nodes.hold(placement);
    this.running.set(hold, { ...who, priority, startMs: entry.arriveAtSeconds * 1000, hold, usage });
    this.report.placed++;
    this.report.placements[who.key] = placement.node;
    if (entry.durationSeconds) {
      const at = entry.arriveAtSeconds + entry.durationSeconds;
      this.departures.push({ at, hold, namespace: who.namespace, usage });
    }
  }

  /**
   * Evicts the card-level victims and places the pod in their room; false when it may not preempt
   * or no node has a fit. As in the cluster, preemption does not look at quota: the victims go,
   * then the pod's bind is judged against its quota like any bind (refused past it, victims gone).
   */
  private preemptFor(entry: TraceEntry, who: PodKey, read: ReadPod): boolean {
    if (read.priority.preemptionPolicy === 'Never') return false;
    const nodes = this.nodes.withPods(this.running.values());
    const choice = choosePreemption(nodes, read.req, read.priority.priority, this.ctx);
    if (!choice) return false;
    for (const v of choice.victims) this.evict(v, who.key, choice.node);
    if (!this.quotaUse.fits(who.namespace, podUsage(choice.set.placement))) {
      this.report.quotaRefused++;
      return true;
    }
    this.admit(entry, who, read.priority.priority, choice.set.placement);
    this.report.preemptions++;
    return true;
  }

  /** A victim gives its cards and quota back at once (the replay has no graceful termination). */
  private evict(victim: PlacedPod, by: string, node: string): void {
    const running = this.running.get(victim.hold);
    if (!running) return;
    this.running.delete(victim.hold);
    this.nodes.release(victim.hold);
    this.quotaUse.remove(running.namespace, running.usage);
    const at = this.departures.findIndex((d) => d.hold === victim.hold);
    if (at >= 0) this.departures.splice(at, 1);
    this.report.victims++;
    this.report.preempted[victim.key] = { by, node };
  }

  finish(): WhatIfReport {
    const r = this.report;
    const considered = r.pods - r.invalid - r.quotaRefused;
    r.placementRate = considered === 0 ? 1 : r.placed / considered;
    for (const node of this.nodes.snapshots.values()) tallyCards(r, node, this.smallest);
    return r;
  }

  /** The pod's placement request; undefined (counted invalid) when the extender would refuse to read it. */
  private readRequest(pod: TraceEntry['pod'], key: string): ReadPod | undefined {
    let req: PlacementRequest;
    let priority: PodPriority;
    try {
      req = readPlacementRequest(pod, this.opts.quantity, this.opts.policy);
      priority = resolveTracePriority(pod, this.opts.priorityClasses ?? []);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      this.report.invalid++;
      if (this.report.invalidExamples.length < 5)
        this.report.invalidExamples.push(`${key}: ${e.errors[0]?.message ?? e.message}`);
      return undefined;
    }
    for (const c of req.containers) {
      if (c.corePerCard < 100) this.smallest.core = Math.min(this.smallest.core, c.corePerCard);
      if (c.memoryMiBPerCard !== undefined)
        this.smallest.memoryMiB = Math.min(this.smallest.memoryMiB, c.memoryMiBPerCard);
    }
    return { req, priority };
  }

  /** A pod no node took counts under the reason most nodes gave. */
  private countUnplaced(refusals: Map<string, number>): void {
    this.report.unplaced++;
    const top = [...refusals].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 'no-nodes';
    this.report.unplacedReasons[top] = (this.report.unplacedReasons[top] ?? 0) + 1;
  }
}

/** Adds a node's cards to the capacity, use and stranded totals. */
function tallyCards(r: WhatIfReport, node: NodeSnapshot, smallest: SmallestAsk): void {
  for (const c of node.cards) {
    r.cards++;
    r.coreCapacity += 100;
    r.coreUsed += c.usedCore;
    r.memoryCapacityMiB += c.memoryMiB;
    r.memoryUsedMiB += c.usedMemoryMiB;
    const use = { memoryMiB: c.memoryMiB, coreUsed: c.usedCore, memoryUsedMiB: c.usedMemoryMiB };
    if (!isPartlyUsed(use)) continue;
    const stranded = strandedOnCard(use, smallest);
    r.strandedCore += stranded.core;
    r.strandedMemoryMiB += stranded.memoryMiB;
  }
}

function pct(n: number, d: number): string {
  return d === 0 ? '0.0%' : `${((100 * n) / d).toFixed(1)}%`;
}

/** The report as people read it. */
export function formatWhatIf(r: WhatIfReport): string {
  const lines = [
    `pods in trace          ${r.pods}`,
    `placed                 ${r.placed}  (placement rate ${(r.placementRate * 100).toFixed(1)}% of valid, in-quota pods)`,
    `no node could take     ${r.unplaced}${
      Object.keys(r.unplacedReasons).length
        ? `  (${Object.entries(r.unplacedReasons)
            .map(([k, v]) => `${k}: ${v}`)
            .join(', ')})`
        : ''
    }`,
    `refused by quota       ${r.quotaRefused}`,
    ...(r.preemptions > 0
      ? [`placed by preempting   ${r.preemptions}  (${r.victims} lower-priority pods evicted)`]
      : []),
    `invalid requests       ${r.invalid}`,
    `cards                  ${r.cards}`,
    `core in use            ${r.coreUsed} / ${r.coreCapacity} hundredths (${pct(r.coreUsed, r.coreCapacity)})`,
    `memory in use          ${r.memoryUsedMiB} / ${r.memoryCapacityMiB} MiB (${pct(r.memoryUsedMiB, r.memoryCapacityMiB)})`,
    `stranded core          ${r.strandedCore} hundredths (${pct(r.strandedCore, r.coreCapacity)}): free, but its card has too little memory left`,
    `stranded memory        ${r.strandedMemoryMiB} MiB (${pct(r.strandedMemoryMiB, r.memoryCapacityMiB)}): free, but its card has too little core left`,
  ];
  for (const ex of r.invalidExamples) lines.push(`  invalid: ${ex}`);
  return lines.join('\n');
}
