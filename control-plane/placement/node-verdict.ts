/**
 * Filter's per-node verdict: refused with a reason, or feasible with the node's score. Most pods
 * ask one share (or one whole card) with no card filters; for them feasibility is "some healthy
 * card has the core and the memory free" and the score depends only on what the pod adds to the
 * node, not on which card bind will pick, so no placement is built. Everything else goes through
 * the full card choice (fitPod). A property test holds the two paths to the same answers.
 */
import type { ContainerGpuRequest } from '../../contract/index.js';
import type { CardSnapshot, NodeSnapshot } from './cluster-snapshot.js';
import { type FitContext, fitPod, type Refusal, screenRefusal } from './fit.js';
import type { PlacementRequest } from './placement-request.js';
import { scoreNode, scoreOf, utilizationWith } from './score.js';
import { chooseCardSet } from './topology.js';

export type NodeVerdict = { ok: true; score: number } | { ok: false; refusal: Refusal };

/** The one container of a pod the shortcut can judge, or undefined. */
function simpleContainer(req: PlacementRequest): ContainerGpuRequest | undefined {
  if (req.containers.length !== 1) return undefined;
  const c = req.constraints;
  if (c.singleNuma) return undefined;
  if (c.modelInclude.length + c.modelExclude.length + c.uuidInclude.length + c.uuidExclude.length > 0) return undefined;
  const only = req.containers[0];
  // Whole MIG instances are not cards: the card summary says nothing about them.
  return only?.mig === undefined ? only : undefined;
}

/** Whether one healthy card has `core` and `memoryMiB` free at once. */
function hasShareRoom(node: NodeSnapshot, core: number, memoryMiB: number): boolean {
  const free = node.healthyFree;
  for (let i = 0; i < free.length; i += 2) {
    if ((free[i] as number) >= core && (free[i + 1] as number) >= memoryMiB) return true;
  }
  return false;
}

/** Per node snapshot (immutable, replaced on change) and card count: the best links among its free cards. */
const linkQualityCache = new WeakMap<NodeSnapshot, Map<number, number | undefined>>();

/** The link quality the full card choice gets for k entirely free healthy cards, in its candidate order. */
function bestFreeLinkQuality(node: NodeSnapshot, k: number): number | undefined {
  let perK = linkQualityCache.get(node);
  if (perK?.has(k)) return perK.get(k);
  const free = node.healthyIndexes.filter((i) => {
    const card = node.cards[i] as CardSnapshot;
    return card.usedCore <= 0 && card.usedMemoryMiB <= 0;
  });
  const quality = chooseCardSet(free, k, node.links)?.quality;
  if (!perK) {
    perK = new Map();
    linkQualityCache.set(node, perK);
  }
  perK.set(k, quality);
  return quality;
}

export function judgeNode(req: PlacementRequest, node: NodeSnapshot | undefined, ctx: FitContext): NodeVerdict {
  const v = scoreOrRefuseNode(req, node, ctx);
  return typeof v === 'number' ? { ok: true, score: v } : { ok: false, refusal: v };
}

/**
 * judgeNode's verdict unwrapped: the node's score when it can hold the pod, else the refusal.
 * Filter runs it on every offered node, so a feasible node on the shortcuts allocates nothing.
 */
export function scoreOrRefuseNode(
  req: PlacementRequest,
  node: NodeSnapshot | undefined,
  ctx: FitContext,
): number | Refusal {
  const screened = screenRefusal(req, node, ctx);
  if (screened) return screened;
  const n = node as NodeSnapshot;
  const only = simpleContainer(req);
  if (only && only.cards === 1 && only.corePerCard < 100) {
    const memoryMiB = only.memoryMiBPerCard ?? 0;
    if (hasShareRoom(n, only.corePerCard, memoryMiB)) {
      return scoreOf(utilizationWith(n, only.corePerCard, memoryMiB), req.policy);
    }
  } else if (only && !only.isInit && n.free.uniformMemoryMiB > 0 && n.free.wholeCards >= only.cards) {
    // Whole cards on a node whose healthy cards all have the same memory: any free ones add the
    // same; k > 1 cards also weigh the best links among the free cards, which depend on the node alone.
    const memoryMiB = n.free.uniformMemoryMiB;
    if ((only.memoryMiBPerCard ?? 0) <= memoryMiB) {
      const util = utilizationWith(n, 100 * only.cards, memoryMiB * only.cards);
      if (only.cards === 1) return scoreOf(util, req.policy);
      const quality = bestFreeLinkQuality(n, only.cards);
      if (quality !== undefined) return scoreOf(util, req.policy, Math.min(1, quality));
    }
  }
  // Refusals keep the full path's exact wording; other pods need the real card choice for their score.
  const fit = fitPod(req, n, ctx);
  return fit.ok ? scoreNode(n, fit.placement, req.policy) : fit.refusal;
}
