/**
 * Preemption, card-aware: which lower-priority pods must go from one node so that a pod fits on
 * specific cards. kube-scheduler counts a node's vcuda-core as one number, so it may evict 60 core
 * spread over three cards and free nothing a 60-core share can use; here every candidate set is
 * tried with the same card fit as filter (fit.ts, topology.ts), after taking the victims' holds away.
 *
 * The victims are chosen as kube-scheduler's default preemption chooses them (SelectVictimsOnNode):
 * take every lower-priority pod away; if the pod fits, give pods back one at a time, the ones whose
 * eviction would violate a PodDisruptionBudget first, then by priority (highest first) and start
 * time (oldest first); a pod whose return breaks the fit is a victim. Fit only grows as holds go,
 * so the set is minimal: no pod of it can be spared. Because one card is what a share needs, the
 * same is also tried with the pods of each single card as the only candidates, and the best of
 * these sets wins by kube-scheduler's node ordering (fewest PDB violations, then the lowest
 * highest-victim priority, the lowest priority sum, the fewest victims). Pure: no I/O.
 */
import { type CardSnapshot, composeNodeSnapshot, type NodeInventoryRead } from './cluster-snapshot.js';
import { type FitContext, fitPod, type NodePlacement } from './fit.js';
import type { CardHold } from './holds/index.js';
import type { PlacementRequest } from './placement-request.js';

/** A pod on the node that preemption may propose, with what it holds there. */
export type VictimCandidate = Readonly<{
  uid: string;
  /** `namespace/name`, for messages. */
  pod: string;
  priority: number;
  /** Whether evicting it would violate a PodDisruptionBudget (kube-scheduler's count). */
  violatesPdb: boolean;
  /** When it started (ms since epoch; 0 when unknown): among equals the older one is kept. */
  startMs: number;
  hold: CardHold;
}>;

export type PreemptionInput = Readonly<{
  node: NodeInventoryRead;
  /** Holds of every other holder on the node: pods that are not candidates, pending binds. */
  kept: readonly CardHold[];
  candidates: readonly VictimCandidate[];
  preemptorPriority: number;
  request: PlacementRequest;
  ctx: FitContext;
}>;

export type VictimSet = Readonly<{
  victims: readonly VictimCandidate[];
  pdbViolations: number;
  /** Where the pod would go once the victims are gone. */
  placement: NodePlacement;
}>;

export type PreemptionChoice = ({ ok: true } & VictimSet) | { ok: false; reason: string };

/** kube-scheduler's MoreImportantPod: higher priority, then the older start; uid keeps it total. */
function moreImportantFirst(a: VictimCandidate, b: VictimCandidate): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  if (a.startMs !== b.startMs) return a.startMs - b.startMs;
  return a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0;
}

/** Fit on the node with every candidate but those in `gone` (all of lower priority) still holding its cards. */
function fitWithout(input: PreemptionInput, gone: ReadonlySet<VictimCandidate>) {
  const holds: CardHold[] = [...input.kept];
  for (const c of input.candidates) if (!gone.has(c)) holds.push(c.hold);
  return fitPod(input.request, composeNodeSnapshot(input.node, holds), input.ctx);
}

/**
 * From `pool` all gone (the pod must fit so), gives pods back in kube-scheduler's order and keeps
 * as victims those whose return breaks the fit; undefined when the pod does not fit even so.
 */
function reprieve(input: PreemptionInput, pool: readonly VictimCandidate[]): VictimSet | undefined {
  const gone = new Set(pool);
  let fit = fitWithout(input, gone);
  if (!fit.ok) return undefined;
  const ordered = [...pool].sort(moreImportantFirst);
  const order = [...ordered.filter((c) => c.violatesPdb), ...ordered.filter((c) => !c.violatesPdb)];
  for (const c of order) {
    gone.delete(c);
    const back = fitWithout(input, gone);
    if (back.ok) fit = back;
    else gone.add(c);
  }
  if (!fit.ok) return undefined;
  const victims = order.filter((c) => gone.has(c));
  return { victims, pdbViolations: victims.filter((c) => c.violatesPdb).length, placement: fit.placement };
}

/** kube-scheduler's ordering of candidate nodes, applied to victim sets: negative when `a` is better. */
export function compareVictimSets(a: VictimSet, b: VictimSet): number {
  if (a.pdbViolations !== b.pdbViolations) return a.pdbViolations - b.pdbViolations;
  const top = (s: VictimSet) => Math.max(Number.MIN_SAFE_INTEGER, ...s.victims.map((v) => v.priority));
  if (top(a) !== top(b)) return top(a) - top(b);
  // kube-scheduler offsets each priority by MaxInt32+1 so that negative priorities sum sensibly.
  const sum = (s: VictimSet) => s.victims.reduce((t, v) => t + v.priority + 2 ** 31, 0);
  if (sum(a) !== sum(b)) return sum(a) - sum(b);
  return a.victims.length - b.victims.length;
}

/** The candidates holding anything on each card, card by card (the per-card tries). */
function candidatesByCard(cards: readonly Pick<CardSnapshot, 'uuid'>[], lower: readonly VictimCandidate[]) {
  return cards
    .map((card) => lower.filter((c) => c.hold.cardUse.has(card.uuid)))
    .filter((pool) => pool.length > 0 && pool.length < lower.length);
}

/**
 * The fewest, least important pods whose eviction lets the preemptor fit on this node's cards;
 * refused when even evicting every lower-priority pod would not (the node is dropped).
 */
export function chooseVictims(input: PreemptionInput): PreemptionChoice {
  const lower = input.candidates.filter((c) => c.priority < input.preemptorPriority);
  const all = reprieve(input, lower);
  if (!all) {
    const fit = fitWithout(input, new Set(lower));
    const why = fit.ok ? 'no card-level fit' : fit.refusal.message;
    return { ok: false, reason: `evicting every lower-priority pod (${lower.length}) would not make room: ${why}` };
  }
  let best = all;
  for (const pool of candidatesByCard(input.node.cards, lower)) {
    const set = reprieve(input, pool);
    if (set && compareVictimSets(set, best) < 0) best = set;
  }
  return { ok: true, ...best };
}
