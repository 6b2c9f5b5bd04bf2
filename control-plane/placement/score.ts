/**
 * Node scores for kube-scheduler's prioritize, 0..10 (MaxExtenderPriority). Binpack favours the
 * node left fullest, spread the emptiest; a pod with multi-card containers also weighs how well
 * its chosen cards are linked, so an NVLinked set beats a fuller node that would split across sockets.
 */
import { type NodeSnapshot, sharedMigCore } from './cluster-snapshot.js';
import type { NodePlacement } from './fit.js';
import type { PlacementPolicy } from './placement-request.js';

export const MAX_EXTENDER_SCORE = 10;

/** Share of the node's core and memory in use once the pod is placed, 0..1 (mean of the two). */
export function utilizationAfter(node: NodeSnapshot, placement: NodePlacement): number {
  let addCore = 0;
  let addMemoryMiB = 0;
  for (const [uuid, add] of placement.cardUse) {
    // A MIG instance or slice adds what the ledger charges it, the part of its card it spans (as the
    // snapshot's totals count it); a share on a shared instance, its part of that part.
    const shared = uuid.startsWith('MIG-') ? node.cards.find((c) => c.uuid === uuid)?.sharedMig : undefined;
    addCore += shared ? sharedMigCore(shared, add.core) : add.core;
    addMemoryMiB += add.memoryMiB;
  }
  return utilizationWith(node, addCore, addMemoryMiB);
}

/** utilizationAfter from what the pod adds in all, wherever on the node it lands. */
export function utilizationWith(node: NodeSnapshot, addCore: number, addMemoryMiB: number): number {
  const totalCore = node.totals.cards * 100;
  const totalMem = node.totals.memoryMiB;
  if (totalCore === 0 || totalMem === 0) return 0;
  return Math.min(
    1,
    ((node.totals.usedCore + addCore) / totalCore + (node.totals.usedMemoryMiB + addMemoryMiB) / totalMem) / 2,
  );
}

/** The score from the utilisation after placement and, for multi-card containers, the link quality. */
export function scoreOf(util: number, policy: PlacementPolicy, multiCardLinkQuality?: number): number {
  const fitScore = policy === 'binpack' ? util : 1 - util;
  const combined = multiCardLinkQuality === undefined ? fitScore : (fitScore + multiCardLinkQuality) / 2;
  return Math.round(combined * MAX_EXTENDER_SCORE);
}

/** The node's score for this pod: 0 (worst) .. 10 (best). */
export function scoreNode(node: NodeSnapshot, placement: NodePlacement, policy: PlacementPolicy): number {
  const isMultiCard = placement.containers.some((c) => c.cards.length > 1);
  return scoreOf(utilizationAfter(node, placement), policy, isMultiCard ? placement.linkQuality : undefined);
}
