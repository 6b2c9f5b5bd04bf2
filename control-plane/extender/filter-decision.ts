/**
 * Filter and prioritize as plain functions over one snapshot: every offered node is either
 * feasible (with the score of the placement bind would make) or refused with a reason a person
 * reads. Filter scores as it goes, so prioritize of the same cycle only looks the scores up.
 */
import type { ClusterSnapshot } from '../placement/cluster-snapshot.js';
import type { FitContext, Refusal } from '../placement/fit.js';
import { scoreOrRefuseNode } from '../placement/node-verdict.js';
import type { PlacementRequest } from '../placement/placement-request.js';
import type { HostPriority } from './extender-api.js';

export type FilterOutcome = {
  /** Snapshot version the outcome was computed on. */
  version: number;
  feasible: string[];
  /** Scores 0..10, one per entry of `feasible`. */
  feasibleScores: number[];
  refused: Map<string, Refusal>;
};

export function filterNodes(
  req: PlacementRequest,
  snapshot: ClusterSnapshot,
  nodeNames: readonly string[],
  ctx: FitContext,
): FilterOutcome {
  // Sized once for the offer and trimmed after: growing them entry by entry reallocates each several times.
  const feasible: string[] = new Array(nodeNames.length);
  const feasibleScores: number[] = new Array(nodeNames.length);
  const refused = new Map<string, Refusal>();
  const nodes = snapshot.nodes;
  let n = 0;
  for (const name of nodeNames) {
    const v = scoreOrRefuseNode(req, nodes.get(name), ctx);
    if (typeof v === 'number') {
      feasible[n] = name;
      feasibleScores[n] = v;
      n += 1;
    } else refused.set(name, v);
  }
  feasible.length = n;
  feasibleScores.length = n;
  return { version: snapshot.version, feasible, feasibleScores, refused };
}

/** Whether two name lists are equal, element by element. */
function isSameList(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Whether `outcome` judged every one of `nodeNames` (so prioritize can reuse it). */
export function coversNodes(outcome: FilterOutcome, nodeNames: readonly string[]): boolean {
  // kube-scheduler offers prioritize exactly what filter kept: the common case costs one pass.
  if (isSameList(nodeNames, outcome.feasible)) return true;
  const feasible = new Set(outcome.feasible);
  return nodeNames.every((n) => feasible.has(n) || outcome.refused.has(n));
}

/** Scores 0..10 for the feasible nodes among `nodeNames`; refused or unknown nodes score 0. */
export function prioritizeNodes(nodeNames: readonly string[], outcome: FilterOutcome): HostPriority[] {
  const scores = outcome.feasibleScores;
  if (isSameList(nodeNames, outcome.feasible)) {
    return nodeNames.map((Host, i) => ({ Host, Score: scores[i] as number }));
  }
  const byName = new Map(outcome.feasible.map((name, i) => [name, scores[i] as number]));
  return nodeNames.map((Host) => ({ Host, Score: byName.get(Host) ?? 0 }));
}

/** One line for the pod's event: `0/3 nodes can hold the pod: n1: no card ...; n2: ...`. */
export function summarizeRefusals(offered: number, refused: ReadonlyMap<string, Refusal>, maxListed = 5): string {
  const listed = [...refused.entries()].slice(0, maxListed).map(([node, r]) => `${node}: ${r.message}`);
  const more = refused.size > maxListed ? `; and ${refused.size - maxListed} more` : '';
  return `0/${offered} nodes can hold the pod: ${listed.join('; ')}${more}`;
}
