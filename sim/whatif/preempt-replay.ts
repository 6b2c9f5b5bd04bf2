/**
 * Preemption during a what-if replay: when no node takes a pod, which lower-priority placed pods
 * to evict, decided by the extender's own card-aware `chooseVictims` on every node, and the node
 * picked by kube-scheduler's ordering of candidates (fewest PDB violations, lowest victim
 * priorities, fewest victims), ties to the first name so reports are reproducible. Pure.
 */
import type { NodeInventoryRead } from '../../control-plane/placement/cluster-snapshot.js';
import type { FitContext } from '../../control-plane/placement/fit.js';
import type { CardHold } from '../../control-plane/placement/holds/index.js';
import type { PlacementRequest } from '../../control-plane/placement/placement-request.js';
import {
  chooseVictims,
  compareVictimSets,
  type VictimCandidate,
  type VictimSet,
} from '../../control-plane/placement/preemption.js';

/** A pod the replay placed, as preemption sees it. */
export type PlacedPod = Readonly<{
  uid: string;
  /** `namespace/name`. */
  key: string;
  namespace: string;
  priority: number;
  /** When it arrived in the trace (ms): among equals the older one is kept. */
  startMs: number;
  hold: CardHold;
}>;

export type NodePods = Readonly<{ inventory: NodeInventoryRead; pods: readonly PlacedPod[] }>;

export type ReplayPreemption = Readonly<{ node: string; set: VictimSet; victims: readonly PlacedPod[] }>;

function candidateOf(p: PlacedPod): VictimCandidate {
  // A trace declares no PodDisruptionBudgets.
  return { uid: p.uid, pod: p.key, priority: p.priority, violatesPdb: false, startMs: p.startMs, hold: p.hold };
}

/** The best node to preempt on and its victims; undefined when no node has a card-level fit. */
export function choosePreemption(
  nodes: readonly NodePods[],
  request: PlacementRequest,
  priority: number,
  ctx: FitContext,
): ReplayPreemption | undefined {
  let best: ReplayPreemption | undefined;
  const sorted = [...nodes].sort((a, b) => a.inventory.name.localeCompare(b.inventory.name));
  for (const { inventory, pods } of sorted) {
    if (!pods.some((p) => p.priority < priority)) continue;
    const byUid = new Map(pods.map((p) => [p.uid, p]));
    const choice = chooseVictims({
      node: inventory,
      kept: [],
      candidates: pods.map(candidateOf),
      preemptorPriority: priority,
      request,
      ctx,
    });
    if (!choice.ok || choice.victims.length === 0) continue;
    if (best && compareVictimSets(choice, best.set) >= 0) continue;
    best = { node: inventory.name, set: choice, victims: choice.victims.map((v) => byUid.get(v.uid) as PlacedPod) };
  }
  return best;
}
