/**
 * The quota pre-check at admission: what a pod will hold in the ledger, as far as admission can
 * know it. The ledger's reservation at bind stays the real gate; this only refuses early a pod
 * that could never fit its namespace's quota, with the ledger's own message.
 */
import { type ContainerGpuRequest, MIB, type PodGpuRequest } from '../contract/index.js';
import type { ClaimShareRequest } from './validate-claim.js';

export type QuotaQuery = {
  cluster: string;
  namespace: string;
  core: number;
  /** The part of `core` that is shares, which a shared MIG instance charges less (absent: none). */
  shareCore?: number;
  memoryMiB: number;
  gpuModel?: string;
  /** Who would hold it: a pod when absent; a claim's refusal says "claim asks". */
  holderKind?: 'pod' | 'claim';
};

export type QuotaAnswer = { ok: true } | { ok: false; message: string };

/** The ledger's pre-check (structurally the ledger's `precheckQuota`). */
export type LedgerQuotaPrecheck = (q: QuotaQuery) => Promise<QuotaAnswer>;

/**
 * The pre-check as the routes use it: the ledger's, or one that answers at once, without a
 * promise, when it already knows (a cached "ok").
 */
export type QuotaPrecheck = (q: QuotaQuery) => QuotaAnswer | Promise<QuotaAnswer>;

export type PodQuotaUsage = {
  /** Hundredths of a card: a 30 share = 30, two whole cards = 200. */
  core: number;
  /**
   * The most of `core` that is shares (under a whole card each), over the containers run together:
   * a share may land on a shared MIG instance, which costs a quota only the part of its card the
   * instance spans, so the ledger prices it at the least such a card would charge.
   */
  shareCore: number;
  /** Known memory only: whole cards without a stated memory hold the card's, unknown until bind. */
  memoryMiB: number;
  /** True when some whole cards' memory is not counted (the card is chosen at bind). */
  hasUncountedMemory: boolean;
};

type Sum = { core: number; memoryMiB: number; uncounted: boolean };

function sumOf(containers: readonly ContainerGpuRequest[]): Sum & { shareCore: number } {
  let core = 0;
  let shareCore = 0;
  let memoryMiB = 0;
  let uncounted = false;
  for (const c of containers) {
    core += c.corePerCard * c.cards;
    if (c.corePerCard < 100) shareCore += c.corePerCard * c.cards;
    if (c.memoryMiBPerCard === undefined) uncounted = true;
    else memoryMiB += c.memoryMiBPerCard * c.cards;
  }
  return { core, shareCore, memoryMiB, uncounted };
}

/**
 * Kubernetes' effective request: init containers run one at a time before the app containers,
 * so the pod holds the larger of the biggest init container and the sum of the app containers,
 * for core and memory separately.
 */
export function measurePodQuotaUsage(request: PodGpuRequest): PodQuotaUsage {
  const app = sumOf(request.containers.filter((c) => !c.isInit));
  const inits = request.containers.filter((c) => c.isInit).map((c) => sumOf([c]));
  const core = Math.max(app.core, ...inits.map((i) => i.core));
  // With the largest share part of any group, `core` less it plus its least price stays a lower bound.
  const shareCore = Math.max(app.shareCore, ...inits.map((i) => i.shareCore));
  const memoryMiB = Math.max(app.memoryMiB, ...inits.map((i) => i.memoryMiB));
  const hasUncountedMemory = app.uncounted || inits.some((i) => i.uncounted);
  return { core, shareCore, memoryMiB, hasUncountedMemory };
}

/**
 * What a claim will hold once allocated, at the least: the sum over its requests of the class, a
 * `firstAvailable` request counted at the least of its alternatives, core and memory each (nothing when one alternative is of
 * another class), memory rounded up to MiB. The allocator may round a request up to the device's
 * step; the ledger charges that at allocation, this only refuses a claim that could never fit.
 */
export function measureClaimQuotaUsage(
  requests: readonly ClaimShareRequest[],
  alternativesOutsideClass: ReadonlySet<string>,
): PodQuotaUsage {
  const cheapest = new Map<string, Sum>();
  for (const r of requests) {
    const memoryMiB = r.memoryBytes === undefined ? 0 : Math.ceil(r.memoryBytes / MIB) * r.count;
    const sum: Sum = { core: r.cores * r.count, memoryMiB, uncounted: r.memoryBytes === undefined };
    const known = cheapest.get(r.parent);
    // The least each alternative could take, core and memory each: a lower bound, never more.
    cheapest.set(
      r.parent,
      known
        ? {
            core: Math.min(known.core, sum.core),
            memoryMiB: Math.min(known.memoryMiB, sum.memoryMiB),
            uncounted: known.uncounted || sum.uncounted,
          }
        : sum,
    );
  }
  let core = 0;
  let memoryMiB = 0;
  let hasUncountedMemory = false;
  for (const [parent, sum] of cheapest) {
    if (alternativesOutsideClass.has(parent)) continue;
    core += sum.core;
    memoryMiB += sum.memoryMiB;
    hasUncountedMemory ||= sum.uncounted;
  }
  // A claim's shares are never on a shared MIG instance (not served in DRA mode): full price.
  return { core, shareCore: 0, memoryMiB, hasUncountedMemory };
}

export type CachedPrecheckOptions = {
  /** How long an "ok" stays good for the same namespace and demand. */
  ttlMs: number;
  /**
   * How much longer a stale "ok" still answers, at once, while one refresh asks the ledger
   * (default 0: past `ttlMs` every review waits for the ledger's new answer).
   */
  staleMs?: number;
  /** Distinct (namespace, demand) keys kept at most; the cache starts over past it. */
  maxEntries?: number;
  /** Monotonic milliseconds. */
  now?: () => number;
};

/** One ledger question: its answer, and the "ok" itself once it came, to answer without a promise. */
type Entry = { at: number; answer: Promise<QuotaAnswer>; ok?: QuotaAnswer; refreshing?: boolean };

function askLedger(precheck: LedgerQuotaPrecheck, q: QuotaQuery, at: number): Entry {
  const entry: Entry = { at, answer: precheck(q) };
  entry.answer.then(
    (r) => {
      if (r.ok) entry.ok = r;
    },
    () => undefined,
  );
  return entry;
}

/**
 * The pre-check for every GPU pod the API server creates, at most one ledger query per namespace
 * and demand per `ttlMs`: calls that arrive while one is in flight share its answer, and an "ok"
 * is reused, synchronously, until it is `ttlMs` old. Then the first call starts one refresh, and
 * until it answers (for at most `staleMs` more) calls are still answered with the old "ok", so no
 * review waits on a ledger round trip (or, on embedded PGlite, queues behind the query's CPU) while
 * the answer is known. A refusal is never reused (the next pod asks the ledger again), and a
 * refresh that refuses or fails ends the reuse: a stale answer can only admit a pod that the
 * reservation at bind then judges, as any pre-check answer can.
 */
export function cachedQuotaPrecheck(precheck: LedgerQuotaPrecheck, opts: CachedPrecheckOptions): QuotaPrecheck {
  const { ttlMs, staleMs = 0, maxEntries = 4096, now = () => performance.now() } = opts;
  const entries = new Map<string, Entry>();
  const forget = (key: string, entry: Entry) => {
    if (entries.get(key) === entry) entries.delete(key);
  };

  function ask(key: string, q: QuotaQuery, at: number): Promise<QuotaAnswer> {
    if (entries.size >= maxEntries) entries.clear();
    const entry = askLedger(precheck, q, at);
    entries.set(key, entry);
    entry.answer.then(
      (r) => {
        if (!r.ok) forget(key, entry);
      },
      () => forget(key, entry),
    );
    return entry.answer;
  }

  // The stale entry keeps answering until its refresh does; an "ok" then takes its place.
  function refresh(key: string, q: QuotaQuery, stale: Entry, at: number): void {
    stale.refreshing = true;
    const next = askLedger(precheck, q, at);
    next.answer.then(
      (r) => {
        if (entries.get(key) !== stale) return;
        if (r.ok) entries.set(key, next);
        else entries.delete(key);
      },
      () => forget(key, stale),
    );
  }

  return (q) => {
    const key = `${q.cluster}\u0000${q.namespace}\u0000${q.core}\u0000${q.shareCore ?? 0}\u0000${q.memoryMiB}\u0000${q.gpuModel ?? ''}\u0000${q.holderKind ?? 'pod'}`;
    const at = now();
    const hit = entries.get(key);
    if (hit && at - hit.at < ttlMs) return hit.ok ?? hit.answer;
    if (hit?.ok && at - hit.at < ttlMs + staleMs) {
      if (!hit.refreshing) refresh(key, q, hit, at);
      return hit.ok;
    }
    return ask(key, q, at);
  };
}
