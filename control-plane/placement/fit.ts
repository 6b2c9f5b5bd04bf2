/**
 * Fit: can this node hold this pod, and on which cards? Pure over a NodeSnapshot.
 * A share needs one card with the core and memory free; k whole cards need k entirely free cards;
 * every container is placed and counted, init containers as Kubernetes counts them (they run one
 * at a time before the app containers, so they may reuse what the pod already holds on a card).
 * A refusal says, in words a person understands, why this node cannot take the pod.
 */
import { type ComputeMode, type ContainerGpuRequest, ledgerUseOfGrant } from '../../contract/index.js';
import type { CardSnapshot, NodeSnapshot } from './cluster-snapshot.js';
import { type DynamicMigTaken, placeDynamicMigContainer } from './dynamic-mig-fit.js';
import { type MigTaken, placeMigContainer } from './mig-fit.js';
import type { CardConstraints, PlacementPolicy, PlacementRequest } from './placement-request.js';
import { type Refusal, type RefusalReason, shareShortfall, tooFewWholeCards } from './refusals.js';
import { chooseCardSet } from './topology.js';

export { capacityReasons, type Refusal, type RefusalReason, refusalReasons } from './refusals.js';

export type CardPlan = {
  uuid: string;
  core: number;
  memoryMiB: number;
  /**
   * A whole MIG instance (`uuid` is its MIG- UUID): its parent card, profile and placement.
   * `dynamic`: one the node agent makes at this placement (`uuid` is the placement's key).
   */
  mig?: { parent: string; profile: string; start: number; size: number; dynamic?: true };
};
export type ContainerPlan = {
  name: string;
  isInit: boolean;
  cards: CardPlan[];
  coreLimit: number;
  mode: ComputeMode;
};

export type NodePlacement = {
  node: string;
  containers: ContainerPlan[];
  /** What the pod holds per card (what the ledger reserves): max(sum of app, largest init). */
  cardUse: Map<string, { core: number; memoryMiB: number }>;
  /** Worst link between the cards of any multi-card container, 0..1 (1 when none). */
  linkQuality: number;
  /** Core left free on the cards the pod uses: low is tight (binpack), high is loose (spread). */
  freeCoreAfter: number;
};

export type FitResult = { ok: true; placement: NodePlacement } | { ok: false; refusal: Refusal };

export type FitContext = Readonly<{
  nowMs: number;
  /** A node whose latest heartbeat is older than this is not offered. */
  heartbeatStaleMs: number;
  /**
   * MiB per vcuda-memory unit the pod's request was read with. A node advertising another unit is
   * refused: kube-scheduler would count the same request as different memory there.
   */
  memoryUnitMiB?: number;
}>;

function refuse(reason: RefusalReason, message: string): FitResult & { ok: false } {
  return { ok: false, refusal: { reason, message } };
}

function seconds(ms: number): string {
  return `${Math.round(ms / 1000)} s`;
}

/** Filters cards by health and the pod's constraints; explains the first filter that left none. */
function selectEligible(node: NodeSnapshot, c: CardConstraints): { eligible: readonly number[] } | Refusal {
  const cards = node.cards;
  // Hot path (every offered node, every cycle): no filters asked, so only health matters.
  if (
    node.healthyIndexes.length > 0 &&
    c.modelInclude.length === 0 &&
    c.modelExclude.length === 0 &&
    c.uuidInclude.length === 0 &&
    c.uuidExclude.length === 0
  ) {
    return { eligible: node.healthyIndexes };
  }
  let pool = cards.map((_, i) => i);
  const step = (keep: (card: CardSnapshot) => boolean, explain: () => string): Refusal | undefined => {
    pool = pool.filter((i) => keep(cards[i] as CardSnapshot));
    return pool.length === 0 ? { reason: 'no-matching-card', message: explain() } : undefined;
  };
  const models = () => [...new Set(cards.map((card) => card.model))].join(', ');
  if (cards.length === 0) return { reason: 'no-matching-card', message: 'node has no GPU' };
  const failed =
    step(
      (card) => card.healthy,
      () => {
        const why = cards.find((card) => card.healthReason)?.healthReason;
        return `all ${cards.length} cards are unhealthy${why ? ` (${why})` : ''}`;
      },
    ) ??
    (c.modelInclude.length > 0
      ? step(
          (card) => c.modelInclude.some((m) => card.model.toLowerCase().includes(m)),
          () => `no healthy card's model matches ${c.modelInclude.join(' or ')} (node has ${models()})`,
        )
      : undefined) ??
    (c.modelExclude.length > 0
      ? step(
          (card) => !c.modelExclude.some((m) => card.model.toLowerCase().includes(m)),
          () => `every healthy card's model is excluded by ${c.modelExclude.join(', ')} (node has ${models()})`,
        )
      : undefined) ??
    (c.uuidInclude.length > 0
      ? step(
          (card) => c.uuidInclude.includes(card.uuid),
          () => `none of the required cards ${c.uuidInclude.join(', ')} is a healthy card here`,
        )
      : undefined) ??
    (c.uuidExclude.length > 0
      ? step(
          (card) => !c.uuidExclude.includes(card.uuid),
          () => 'every healthy card here is excluded by UUID',
        )
      : undefined);
  return failed ?? { eligible: pool };
}

/** Mutable per-attempt state: what is free on each card and what this pod holds on it. */
type Work = { freeCore: number[]; freeMem: number[]; podCore: number[]; podMem: number[] };
const scratch: Work = { freeCore: [], freeMem: [], podCore: [], podMem: [] };

function explainShare(pool: readonly number[], w: Work, core: number, memoryMiB: number, isInit: boolean): Refusal {
  // For an init container, what the pod already holds on a card counts as available to it.
  let bestCore = 0;
  let bestMem = 0;
  let memWithCore = 0;
  for (const i of pool) {
    const freeCore = (w.freeCore[i] as number) + (isInit ? (w.podCore[i] as number) : 0);
    const freeMem = (w.freeMem[i] as number) + (isInit ? (w.podMem[i] as number) : 0);
    if (freeCore > bestCore) bestCore = freeCore;
    if (freeMem > bestMem) bestMem = freeMem;
    if (freeCore >= core && freeMem > memWithCore) memWithCore = freeMem;
  }
  return (
    shareShortfall(core, memoryMiB, bestCore, bestMem) ?? {
      reason: 'insufficient-capacity',
      message: `no card with both ${core} core and ${memoryMiB} MiB free; cards with ${core} core free have at most ${memWithCore} MiB free`,
    }
  );
}

function placeShare(
  cards: readonly CardSnapshot[],
  pool: readonly number[],
  w: Work,
  req: ContainerGpuRequest,
  policy: PlacementPolicy,
): CardPlan[] | Refusal {
  const core = req.corePerCard;
  const mem = req.memoryMiBPerCard ?? 0;
  let pick = -1;
  let pickKey = 0;
  for (const i of pool) {
    const extraCore = req.isInit ? Math.max(0, core - (w.podCore[i] as number)) : core;
    const extraMem = req.isInit ? Math.max(0, mem - (w.podMem[i] as number)) : mem;
    if ((w.freeCore[i] as number) < extraCore || (w.freeMem[i] as number) < extraMem) continue;
    // Binpack takes the card left fullest, spread the emptiest; an init container prefers a card
    // the pod already holds (it costs nothing extra there).
    const left = (w.freeCore[i] as number) - extraCore;
    let key = policy === 'binpack' ? -left : left;
    if (req.isInit && extraCore === 0 && extraMem === 0) key += 1000;
    if (pick < 0 || key > pickKey) {
      pick = i;
      pickKey = key;
    }
  }
  if (pick < 0) return explainShare(pool, w, core, mem, req.isInit);
  take(w, pick, core, mem, req.isInit);
  return [{ uuid: (cards[pick] as CardSnapshot).uuid, core, memoryMiB: mem }];
}

/** Records a container on a card: app containers add up, an init container raises the pod's hold to its size. */
function take(w: Work, i: number, core: number, memoryMiB: number, isInit: boolean): void {
  const newCore = isInit ? Math.max(w.podCore[i] as number, core) : (w.podCore[i] as number) + core;
  const newMem = isInit ? Math.max(w.podMem[i] as number, memoryMiB) : (w.podMem[i] as number) + memoryMiB;
  w.freeCore[i] = (w.freeCore[i] as number) - (newCore - (w.podCore[i] as number));
  w.freeMem[i] = (w.freeMem[i] as number) - (newMem - (w.podMem[i] as number));
  w.podCore[i] = newCore;
  w.podMem[i] = newMem;
}

function placeWhole(
  node: NodeSnapshot,
  pool: readonly number[],
  w: Work,
  req: ContainerGpuRequest,
): { plans: CardPlan[]; quality: number } | Refusal {
  const cards = node.cards;
  // A whole card is exclusive: nothing of another pod on it (an init container may reuse this pod's own cards).
  const isFree = (i: number) => {
    const card = cards[i] as CardSnapshot;
    const core = (w.freeCore[i] as number) + (req.isInit ? (w.podCore[i] as number) : 0);
    const mem = (w.freeMem[i] as number) + (req.isInit ? (w.podMem[i] as number) : 0);
    // A shared MIG instance serves shares only.
    return !card.sharedMig && core === 100 && mem === card.memoryMiB && (req.memoryMiBPerCard ?? 0) <= card.memoryMiB;
  };
  const free = pool.filter(isFree);
  if (req.isInit) free.sort((a, b) => (w.podCore[b] as number) - (w.podCore[a] as number));
  const choice = chooseCardSet(free, req.cards, node.links);
  if (!choice) {
    const tooSmall =
      req.memoryMiBPerCard !== undefined &&
      pool.every((i) => (cards[i] as CardSnapshot).memoryMiB < (req.memoryMiBPerCard as number));
    if (tooSmall) {
      return {
        reason: 'insufficient-memory',
        message: `asks ${req.memoryMiBPerCard} MiB per card; the largest card here has ${Math.max(...pool.map((i) => (cards[i] as CardSnapshot).memoryMiB))} MiB`,
      };
    }
    return tooFewWholeCards(req.cards, free.length);
  }
  const plans = choice.indexes.map((i) => {
    const card = cards[i] as CardSnapshot;
    take(w, i, 100, card.memoryMiB, req.isInit);
    return { uuid: card.uuid, core: 100, memoryMiB: req.memoryMiBPerCard ?? card.memoryMiB };
  });
  return { plans, quality: choice.quality };
}

/** Larger asks first: whole cards (and MIG instances) before shares, bigger shares before smaller ones. */
function orderContainers(containers: readonly ContainerGpuRequest[]): ContainerGpuRequest[] {
  const weight = (c: ContainerGpuRequest) => c.corePerCard * c.cards * 1e7 + (c.memoryMiBPerCard ?? 0);
  const app = containers.filter((c) => !c.isInit).sort((a, b) => weight(b) - weight(a));
  const init = containers.filter((c) => c.isInit).sort((a, b) => weight(b) - weight(a));
  return [...app, ...init];
}

function placeOn(node: NodeSnapshot, pool: readonly number[], req: PlacementRequest): FitResult {
  const cards = node.cards;
  const n = cards.length;
  // Placement is synchronous, so one scratch area serves every call without allocating.
  const w = scratch;
  for (let i = 0; i < n; i++) {
    const c = cards[i] as CardSnapshot;
    w.freeCore[i] = Math.max(0, 100 - c.usedCore);
    w.freeMem[i] = Math.max(0, c.memoryMiB - c.usedMemoryMiB);
    w.podCore[i] = 0;
    w.podMem[i] = 0;
  }
  const plans: CardPlan[][] = new Array(req.containers.length);
  let linkQuality = 1;
  const several = req.containers.length > 1;
  const order = several ? orderContainers(req.containers) : req.containers;
  const migTaken: MigTaken = new Map();
  const dynamicTaken: DynamicMigTaken = new Map();
  for (const c of order) {
    const placed =
      c.mig !== undefined
        ? placeMigInstances(node, req, c, migTaken, dynamicTaken)
        : c.cards > 1 || c.corePerCard === 100
          ? placeWhole(node, pool, w, c)
          : placeShare(cards, pool, w, c, req.policy);
    if ('reason' in placed) {
      const who = several ? `${c.isInit ? 'init container' : 'container'} ${c.name}: ` : '';
      return refuse(placed.reason, who + placed.message);
    }
    const at = req.containers.indexOf(c);
    if (Array.isArray(placed)) plans[at] = placed;
    else {
      plans[at] = placed.plans;
      linkQuality = Math.min(linkQuality, placed.quality);
    }
  }
  const cardUse = new Map<string, { core: number; memoryMiB: number }>();
  let freeCoreAfter = 0;
  for (const i of pool) {
    if ((w.podCore[i] as number) === 0 && (w.podMem[i] as number) === 0) continue;
    cardUse.set((cards[i] as CardSnapshot).uuid, { core: w.podCore[i] as number, memoryMiB: w.podMem[i] as number });
    freeCoreAfter += w.freeCore[i] as number;
  }
  // A MIG instance is held whole, whichever containers of the pod use it; a dynamic one as its slices.
  for (const plan of plans) {
    for (const g of plan ?? []) {
      if (!g.mig) continue;
      for (const u of ledgerUseOfGrant(g)) cardUse.set(u.uuid, { core: u.core, memoryMiB: u.memoryMiB });
    }
  }
  const containers: ContainerPlan[] = [];
  for (let k = 0; k < req.containers.length; k++) {
    const c = req.containers[k] as ContainerGpuRequest;
    containers.push({ name: c.name, isInit: c.isInit, cards: plans[k] ?? [], coreLimit: c.coreLimit, mode: c.mode });
  }
  return { ok: true, placement: { node: node.name, containers, cardUse, linkQuality, freeCoreAfter } };
}

/**
 * A container's whole MIG instances: free static ones first (nothing to create), else placements
 * on the dynamic-MIG cards, the pod's containers not placed yet weighed as pending requests.
 */
function placeMigInstances(
  node: NodeSnapshot,
  req: PlacementRequest,
  c: ContainerGpuRequest,
  migTaken: MigTaken,
  dynamicTaken: DynamicMigTaken,
): ReturnType<typeof placeMigContainer> {
  const fromStatic = placeMigContainer(node.migInstances, c, req.policy, req.constraints, migTaken);
  if (!('reason' in fromStatic) || node.dynamicMig.length === 0) return fromStatic;
  const at = req.containers.indexOf(c);
  const pending = req.containers.flatMap((o, k) =>
    k > at && o.mig !== undefined ? Array.from({ length: o.cards }, () => o.mig as string) : [],
  );
  const fromDynamic = placeDynamicMigContainer(node.dynamicMig, c, req.constraints, dynamicTaken, pending);
  if (!('reason' in fromDynamic)) return fromDynamic;
  return node.migInstances.length === 0
    ? fromDynamic
    : { reason: fromDynamic.reason, message: `${fromStatic.message}; ${fromDynamic.message}` };
}

/** Whether placement `a` suits the pod's policy better than `b`. */
export function isBetterPlacement(a: NodePlacement, b: NodePlacement, policy: PlacementPolicy): boolean {
  if (a.linkQuality !== b.linkQuality) return a.linkQuality > b.linkQuality;
  return policy === 'binpack' ? a.freeCoreAfter < b.freeCoreAfter : a.freeCoreAfter > b.freeCoreAfter;
}

function placeOnOneNuma(node: NodeSnapshot, pool: readonly number[], req: PlacementRequest): FitResult {
  const groups = new Map<string, number[]>();
  for (const i of pool) {
    // A card without a known NUMA node cannot be proven local to any other: it stands alone.
    const numa = (node.cards[i] as CardSnapshot).numaNode;
    const key = numa === null ? `card ${i}` : `NUMA ${numa}`;
    groups.set(key, [...(groups.get(key) ?? []), i]);
  }
  let best: NodePlacement | undefined;
  const misses: string[] = [];
  for (const [key, group] of groups) {
    const r = placeOn(node, group, req);
    if (r.ok) {
      if (!best || isBetterPlacement(r.placement, best, req.policy)) best = r.placement;
    } else misses.push(`${key}: ${r.refusal.message}`);
  }
  if (best) return { ok: true, placement: best };
  return refuse('single-numa', `no single NUMA node can hold the pod (${misses.join('; ')})`);
}

/** Whether every card of the node is smaller than `memoryMiB`. */
function isEveryCardSmaller(node: NodeSnapshot, memoryMiB: number): boolean {
  for (const card of node.cards) if (card.memoryMiB >= memoryMiB) return false;
  return true;
}

/**
 * Most offered nodes are refused for plain lack of room; the node's free summary says so without
 * walking its cards. Only for the common pod: one container, no card filters.
 */
function rejectQuickly(req: PlacementRequest, node: NodeSnapshot): Refusal | undefined {
  if (req.containers.length !== 1) return undefined;
  const c = req.constraints;
  if (c.modelInclude.length + c.modelExclude.length + c.uuidInclude.length + c.uuidExclude.length > 0) return undefined;
  const only = req.containers[0] as ContainerGpuRequest;
  // MIG instances are few per node: their walk is the answer.
  if (only.mig !== undefined) return undefined;
  const free = node.free;
  // No healthy card: let the full path say which filter left none.
  if (free.healthyCards === 0) return undefined;
  if (only.cards > 1 || only.corePerCard === 100) {
    if (free.wholeCards >= only.cards) return undefined;
    if (only.memoryMiBPerCard !== undefined && isEveryCardSmaller(node, only.memoryMiBPerCard)) return undefined;
    return tooFewWholeCards(only.cards, free.wholeCards);
  }
  return shareShortfall(only.corePerCard, only.memoryMiBPerCard ?? 0, free.maxCore, free.maxMemoryMiB);
}

/**
 * The node-level checks that come before any card choice (known node, inventory, heartbeat,
 * memory unit, allocation tie) and the free-summary shortcut: a refusal, or undefined when the
 * cards must be looked at.
 */
export function screenNode(
  req: PlacementRequest,
  node: NodeSnapshot | undefined,
  ctx: FitContext,
): (FitResult & { ok: false }) | undefined {
  const refusal = screenRefusal(req, node, ctx);
  return refusal && { ok: false, refusal };
}

/** screenNode's refusal, unwrapped (filter asks it of every offered node). */
export function screenRefusal(
  req: PlacementRequest,
  node: NodeSnapshot | undefined,
  ctx: FitContext,
): Refusal | undefined {
  if (!node) return { reason: 'unknown-node', message: 'node is not known to vcuda yet' };
  if (node.inventoryError) return { reason: 'no-inventory', message: node.inventoryError };
  const ageMs = ctx.nowMs - node.heartbeatMs;
  if (ageMs > ctx.heartbeatStaleMs) {
    return {
      reason: 'stale-heartbeat',
      message:
        node.heartbeatMs === 0
          ? 'node agent never reported a heartbeat'
          : `node agent heartbeat is ${seconds(ageMs)} old (limit ${seconds(ctx.heartbeatStaleMs)})`,
    };
  }
  if (ctx.memoryUnitMiB !== undefined && node.memoryUnitMiB !== ctx.memoryUnitMiB) {
    return {
      reason: 'memory-unit-mismatch',
      message: `node agent counts vcuda-memory in ${node.memoryUnitMiB} MiB units, the control plane in ${ctx.memoryUnitMiB} MiB; set the same memoryUnitMiB on both`,
    };
  }
  return rejectQuickly(req, node);
}

/** Decides whether `node` can hold the pod and, if so, on exactly which cards. */
export function fitPod(req: PlacementRequest, node: NodeSnapshot | undefined, ctx: FitContext): FitResult {
  const screened = screenNode(req, node, ctx);
  if (screened) return screened;
  return placeOnNode(req, node as NodeSnapshot);
}

/** The card choice on a node that passed screenNode. */
function placeOnNode(req: PlacementRequest, node: NodeSnapshot): FitResult {
  // Pods of one workload ask alike and most nodes do not change between two of them: reuse the
  // card choice made on this very snapshot of the node for the same request.
  const key = keyOf(req);
  let perNode = placementCache.get(node);
  const hit = perNode?.get(key);
  if (hit) return hit;
  // A pod of whole MIG instances only needs no card of its own: the cards' filters would refuse it.
  const needsCards = req.containers.some((c) => c.mig === undefined);
  const selected = needsCards ? selectEligible(node, req.constraints) : { eligible: [] };
  const result: FitResult =
    'reason' in selected
      ? { ok: false, refusal: selected }
      : req.constraints.singleNuma && needsCards
        ? placeOnOneNuma(node, selected.eligible, req)
        : placeOn(node, selected.eligible, req);
  if (!perNode) {
    perNode = new Map();
    placementCache.set(node, perNode);
  } else if (perNode.size >= MAX_CACHED_PER_NODE) perNode.clear();
  perNode.set(key, result);
  return result;
}

/**
 * Card choices per node snapshot and request. Snapshots are immutable and replaced on every
 * change, so an entry can never be stale; entries go when their snapshot is collected. Results
 * are shared: callers must not mutate them.
 */
const placementCache = new WeakMap<NodeSnapshot, Map<string, FitResult>>();
const MAX_CACHED_PER_NODE = 16;
const requestKeys = new WeakMap<PlacementRequest, string>();

/** Everything the card choice depends on, except the pod's identity. */
function keyOf(req: PlacementRequest): string {
  let key = requestKeys.get(req);
  if (key === undefined) {
    key = JSON.stringify([req.policy, req.constraints, req.containers]);
    requestKeys.set(req, key);
  }
  return key;
}
