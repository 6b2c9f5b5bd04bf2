/**
 * What-if capacity planning: replays a workload trace against a described cluster through the
 * same fit and score code the extender runs (control-plane/placement), with namespace quotas
 * counted as the ledger counts them, and no process, socket or database. Pure: same inputs,
 * same report.
 */
import { type QuantityPolicy, ValidationError, vcudaAnnotations } from '../../contract/index.js';
import {
  composeNodeSnapshot,
  type NodeInventoryRead,
  type NodeSnapshot,
  type PodHold,
  readNodeInventory,
} from '../../control-plane/placement/cluster-snapshot.js';
import { type FitContext, fitPod, type NodePlacement } from '../../control-plane/placement/fit.js';
import {
  type PlacementPolicy,
  type PlacementRequest,
  readPlacementRequest,
} from '../../control-plane/placement/placement-request.js';
import { scoreNode } from '../../control-plane/placement/score.js';
import { type ClusterSpec, expandNodes, inventoryOf } from '../cluster-spec.js';
import type { TraceEntry } from '../workload/workload-spec.js';

export type WhatIfOptions = { policy: PlacementPolicy; quantity: QuantityPolicy };

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
  /** Pod → node, for placed pods (`namespace/name`). */
  placements: Record<string, string>;
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
  const nowMs = 0;
  const ctx: FitContext = { nowMs, heartbeatStaleMs: Number.MAX_SAFE_INTEGER };
  // Snapshots are rebuilt with the control plane's own composer from inventory + holds, as its watch cache does.
  // Each node is read from the inventory annotation a node agent would publish, as the extender reads it.
  const inventories = new Map<string, NodeInventoryRead>(
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
  const holds = new Map<string, PodHold[]>([...inventories.keys()].map((n) => [n, []]));
  const nodes = new Map<string, NodeSnapshot>();
  const rebuild = (node: string) => nodes.set(node, composeNodeSnapshot(inventories.get(node)!, holds.get(node)!));
  for (const n of inventories.keys()) rebuild(n);
  const hold = (p: NodePlacement): PodHold => ({ node: p.node, cardUse: p.cardUse });
  const quotaUsed = new Map<string, Usage>();
  const report: WhatIfReport = {
    pods: trace.length,
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
  };
  // Departures are events too: a pod with a duration gives its cards back when it ends.
  type Departure = { at: number; node: string; placement: NodePlacement; hold: PodHold; namespace: string };
  const departures: Departure[] = [];
  let minCore = Number.POSITIVE_INFINITY;
  let minMemoryMiB = Number.POSITIVE_INFINITY;
  let uid = 0;
  for (const entry of trace) {
    departures.sort((a, b) => a.at - b.at);
    while (departures.length && departures[0]!.at <= entry.arriveAtSeconds) {
      const d = departures.shift()!;
      holds.set(
        d.node,
        holds.get(d.node)!.filter((h) => h !== d.hold),
      );
      rebuild(d.node);
      const q = quotaUsed.get(d.namespace)!;
      const u = podUsage(d.placement);
      quotaUsed.set(d.namespace, { core: q.core - u.core, memoryMiB: q.memoryMiB - u.memoryMiB });
    }
    const pod = { ...entry.pod, metadata: { ...entry.pod.metadata, uid: `whatif-${uid++}` } };
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    let req: PlacementRequest;
    try {
      req = readPlacementRequest(pod, opts.quantity, opts.policy);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      report.invalid++;
      if (report.invalidExamples.length < 5)
        report.invalidExamples.push(`${key}: ${e.errors[0]?.message ?? e.message}`);
      continue;
    }
    for (const c of req.containers) {
      if (c.corePerCard < 100) minCore = Math.min(minCore, c.corePerCard);
      if (c.memoryMiBPerCard !== undefined) minMemoryMiB = Math.min(minMemoryMiB, c.memoryMiBPerCard);
    }
    const { best, refusals } = choosePlacement(nodes, req, ctx);
    if (!best) {
      report.unplaced++;
      const top = [...refusals].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 'no-nodes';
      report.unplacedReasons[top] = (report.unplacedReasons[top] ?? 0) + 1;
      continue;
    }
    const usage = podUsage(best);
    const quota = cluster.quotas[pod.metadata.namespace];
    const used = quotaUsed.get(pod.metadata.namespace) ?? { core: 0, memoryMiB: 0 };
    if (quota && (used.core + usage.core > quota.core || used.memoryMiB + usage.memoryMiB > quota.memoryMiB)) {
      report.quotaRefused++;
      continue;
    }
    quotaUsed.set(pod.metadata.namespace, {
      core: used.core + usage.core,
      memoryMiB: used.memoryMiB + usage.memoryMiB,
    });
    const held = hold(best);
    holds.get(best.node)!.push(held);
    rebuild(best.node);
    report.placed++;
    report.placements[key] = best.node;
    if (entry.durationSeconds) {
      departures.push({
        at: entry.arriveAtSeconds + entry.durationSeconds,
        node: best.node,
        placement: best,
        hold: held,
        namespace: pod.metadata.namespace,
      });
    }
  }
  const considered = report.pods - report.invalid - report.quotaRefused;
  report.placementRate = considered === 0 ? 1 : report.placed / considered;
  for (const node of nodes.values()) {
    for (const c of node.cards) {
      report.cards++;
      report.coreCapacity += 100;
      report.coreUsed += c.usedCore;
      report.memoryCapacityMiB += c.memoryMiB;
      report.memoryUsedMiB += c.usedMemoryMiB;
      const isPartial = c.usedCore > 0 || c.usedMemoryMiB > 0;
      if (!isPartial) continue;
      const freeCore = 100 - c.usedCore;
      const freeMem = c.memoryMiB - c.usedMemoryMiB;
      if (freeMem < minMemoryMiB) report.strandedCore += freeCore;
      if (freeCore < minCore) report.strandedMemoryMiB += freeMem;
    }
  }
  return report;
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
