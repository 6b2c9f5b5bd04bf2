/**
 * The quota pre-check at admission: what a pod will hold in the ledger, as far as admission can
 * know it. The ledger's reservation at bind stays the real gate; this only refuses early a pod
 * that could never fit its namespace's quota, with the ledger's own message.
 */
import type { ContainerGpuRequest, PodGpuRequest } from '../contract/index.js';

/** The ledger's pre-check, as the routes use it (structurally the ledger's `precheckQuota`). */
export type QuotaPrecheck = (q: {
  cluster: string;
  namespace: string;
  core: number;
  memoryMiB: number;
  gpuModel?: string;
}) => Promise<{ ok: true } | { ok: false; message: string }>;

export type PodQuotaUsage = {
  /** Hundredths of a card: a 30 share = 30, two whole cards = 200. */
  core: number;
  /** Known memory only: whole cards without a stated memory hold the card's, unknown until bind. */
  memoryMiB: number;
  /** True when some whole cards' memory is not counted (the card is chosen at bind). */
  hasUncountedMemory: boolean;
};

type Sum = { core: number; memoryMiB: number; uncounted: boolean };

function sumOf(containers: readonly ContainerGpuRequest[]): Sum {
  let core = 0;
  let memoryMiB = 0;
  let uncounted = false;
  for (const c of containers) {
    core += c.corePerCard * c.cards;
    if (c.memoryMiBPerCard === undefined) uncounted = true;
    else memoryMiB += c.memoryMiBPerCard * c.cards;
  }
  return { core, memoryMiB, uncounted };
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
  const memoryMiB = Math.max(app.memoryMiB, ...inits.map((i) => i.memoryMiB));
  const hasUncountedMemory = app.uncounted || inits.some((i) => i.uncounted);
  return { core, memoryMiB, hasUncountedMemory };
}

export type CachedPrecheckOptions = {
  /** How long an "ok" stays good for the same namespace and demand. */
  ttlMs: number;
  /** Distinct (namespace, demand) keys kept at most; the cache starts over past it. */
  maxEntries?: number;
  /** Monotonic milliseconds. */
  now?: () => number;
};

/**
 * The pre-check for every GPU pod the API server creates, at most one ledger query per namespace
 * and demand per `ttlMs`: calls that arrive while one is in flight share its answer, and an "ok"
 * is reused until it is `ttlMs` old. A refusal is never reused (the next pod asks the ledger
 * again), so a stale answer can only admit a pod that the reservation at bind then judges.
 */
export function cachedQuotaPrecheck(precheck: QuotaPrecheck, opts: CachedPrecheckOptions): QuotaPrecheck {
  const { ttlMs, maxEntries = 4096, now = () => performance.now() } = opts;
  type Entry = { at: number; answer: ReturnType<QuotaPrecheck> };
  const entries = new Map<string, Entry>();
  return (q) => {
    const key = `${q.cluster}\u0000${q.namespace}\u0000${q.core}\u0000${q.memoryMiB}\u0000${q.gpuModel ?? ''}`;
    const at = now();
    const hit = entries.get(key);
    if (hit && at - hit.at < ttlMs) return hit.answer;
    if (entries.size >= maxEntries) entries.clear();
    const answer = precheck(q);
    const entry = { at, answer };
    entries.set(key, entry);
    const forget = () => {
      if (entries.get(key) === entry) entries.delete(key);
    };
    answer.then((r) => {
      if (!r.ok) forget();
    }, forget);
    return answer;
  };
}
