/**
 * A DRA claim's use, billed per share (pure). The ledger holds a claim as one row per allocated
 * share (`claim:<uid>`, the share's key as its container), while the node prepares one budget per
 * card for the whole claim: its region measures the claim on the card, not each share. So the
 * card's figures are split among the shares on it, the SM share by the cores each consumed and
 * memory by the memory each consumed, in whole basis points and bytes (largest remainder), so the
 * parts always add up to what was measured.
 */
import type { LedgerHolder, LedgerShare } from './allocation/ports.js';
import type { UsageSample } from './usage.js';

/** Whole parts of `total` in proportion to `weights`, summing to `total` exactly (ties go to the earlier weight). */
export function splitByWeights(total: number, weights: readonly number[]): number[] {
  const sum = weights.reduce((s, w) => s + w, 0);
  if (sum <= 0 || total <= 0) return weights.map(() => 0);
  const exact = weights.map((w) => (total * w) / sum);
  const parts = exact.map(Math.floor);
  let left = total - parts.reduce((s, p) => s + p, 0);
  const byRemainder = exact
    .map((x, i) => ({ i, rest: x - Math.floor(x) }))
    .sort((a, b) => b.rest - a.rest || a.i - b.i);
  for (const { i } of byRemainder) {
    if (left <= 0) break;
    parts[i] = (parts[i] ?? 0) + 1;
    left--;
  }
  return parts;
}

const BP_PER_SHARE = 10_000;

/**
 * One card's sample of a claim as the ledger's samples of the claim's shares on that card; none
 * when the claim has no share there. Each share's core limit is its part of the card's limit
 * (rounded up), so the control plane's clamp never cuts what the claim was allowed as a whole.
 */
export function shareSamples(sample: UsageSample, holder: LedgerHolder): UsageSample[] {
  const shares: LedgerShare[] = holder.shares.filter((s) => s.cardUuid === sample.cardUuid);
  if (shares.length === 0) return [];
  const cores = shares.map((s) => s.cores);
  const memory = shares.map((s) => s.memoryBytes);
  const totalCores = cores.reduce((s, c) => s + c, 0);
  const bp = sample.smShare === null ? null : splitByWeights(Math.round(sample.smShare * BP_PER_SHARE), cores);
  const used = splitByWeights(sample.memoryUsedBytes, memory);
  const burst = splitByWeights(sample.memoryBurstBytes ?? 0, memory);
  const evicted = splitByWeights(sample.memoryBurstEvictedBytes ?? 0, memory);
  const evictions = splitByWeights(sample.memoryBurstEvictions ?? 0, memory);
  return shares.map((share, i) => ({
    ...sample,
    podUid: holder.id,
    pod: holder.name,
    container: share.key,
    memoryUsedBytes: used[i] ?? 0,
    memoryLimitBytes: share.memoryBytes,
    memoryBurstBytes: burst[i] ?? 0,
    memoryBurstEvictedBytes: evicted[i] ?? 0,
    memoryBurstEvictions: evictions[i] ?? 0,
    coreRequest: share.cores,
    coreLimit: Math.min(100, Math.max(1, Math.ceil((sample.coreLimit * share.cores) / totalCores))),
    smShare: bp === null ? null : (bp[i] ?? 0) / BP_PER_SHARE,
  }));
}
