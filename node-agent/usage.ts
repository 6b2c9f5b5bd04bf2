/**
 * Per-container usage, read from each container's region and its limits (pure over the records
 * and a region reader), then optionally reported to the control plane for the ledger, under the
 * ledger's keys (`reportedUsage`).
 */
import { readFile } from 'node:fs/promises';
import type { ContainerRecord, LedgerHolder, LedgerShare } from './allocation/ports.js';
import { readRegionUsage } from './limits/region-file.js';

export type UsageSample = {
  podUid: string;
  namespace: string;
  pod: string;
  container: string;
  cardUuid: string;
  memoryUsedBytes: number;
  memoryLimitBytes: number;
  /** Managed bytes above the guarantee, of them on the host, and evictions so far (0: no burst). */
  memoryBurstBytes?: number;
  memoryBurstEvictedBytes?: number;
  memoryBurstEvictions?: number;
  coreRequest: number;
  coreLimit: number;
  /** This container's measured share of the card's SM time, 0..1 (0: measured idle); null before the first sample. */
  smShare: number | null;
};

export type RegionReader = typeof readRegionUsage;

export function collectUsage(records: readonly ContainerRecord[], read: RegionReader = readRegionUsage): UsageSample[] {
  const out: UsageSample[] = [];
  for (const r of records) {
    const usage = read(r.paths.regionPath, r.devices.length);
    r.devices.forEach((d, i) => {
      const u = usage?.[i];
      out.push({
        podUid: r.podUid,
        namespace: r.namespace,
        pod: r.podName,
        container: r.container,
        cardUuid: d.uuid,
        memoryUsedBytes: u?.usedBytes ?? 0,
        memoryLimitBytes: d.memoryLimitBytes,
        memoryBurstBytes: u?.burstBytes ?? 0,
        memoryBurstEvictedBytes: u?.burstEvictedBytes ?? 0,
        memoryBurstEvictions: u?.burstEvictions ?? 0,
        coreRequest: d.coreRequest,
        coreLimit: d.coreLimit,
        // A measured 0 is an idle allocation, which the idle report exists to find: only a
        // container the sampler has not measured yet has no figure.
        smShare: u && u.sampleTimeMs > 0 ? u.measuredShareBp / 10_000 : null,
      });
    });
  }
  return out;
}

/**
 * The samples a usage report carries: collectUsage's, under the keys the control plane's ledger
 * holds the cards by. A pod's container is its own key; a record the ledger holds under another
 * holder (a DRA claim) is reported once per share of each card (`shareSamples` below).
 */
export function reportedUsage(
  records: readonly ContainerRecord[],
  read: RegionReader = readRegionUsage,
): UsageSample[] {
  return records.flatMap((r) => {
    const samples = collectUsage([r], read);
    const holder = r.ledgerHolder;
    return holder ? samples.flatMap((s) => shareSamples(s, holder)) : samples;
  });
}

/** Where usage goes; the control plane's endpoint is optional. */
export interface UsageSink {
  /** `periodS`: the seconds these samples cover (the reporting period). */
  report(node: string, samples: readonly UsageSample[], at: Date, periodS: number): Promise<void>;
}

/** Reads the bearer token for each report: projected service account tokens rotate, so it is never kept. */
export type TokenSource = () => Promise<string | undefined>;

/** The pod's service account token, or none outside a cluster (the control plane then refuses or trusts). */
export function tokenFromFile(path: string): TokenSource {
  return async () => {
    try {
      return (await readFile(path, 'utf8')).trim() || undefined;
    } catch {
      // No token file outside a cluster: the report goes without one, and the control plane decides.
      return undefined;
    }
  };
}

/** A report not taken; `retryable` when sending the same report later can succeed (the ledger or network was down). */
export class UsageReportError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Statuses that say "not now": a timeout, too many requests, or the server (or its ledger) unavailable. */
const isRetryableStatus = (status: number) => status === 408 || status === 429 || status >= 500;

/**
 * `POST {baseUrl}/api/v1/usage` with `{ node, at, periodS, samples }`, carrying the service
 * account token the control plane reviews; a 404 means the endpoint does not exist yet.
 */
export class HttpUsageSink implements UsageSink {
  constructor(
    private readonly baseUrl: string,
    private readonly options: { token?: TokenSource; fetchFn?: typeof fetch; timeoutMs?: number } = {},
  ) {}

  async report(node: string, samples: readonly UsageSample[], at: Date, periodS: number): Promise<void> {
    const token = await this.options.token?.();
    let res: Response;
    try {
      res = await (this.options.fetchFn ?? fetch)(new URL('/api/v1/usage', this.baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ node, at: at.toISOString(), periodS, samples }),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 5000),
      });
    } catch (err) {
      // Refused, reset or timed out: the same report may well be taken later.
      throw new UsageReportError(`usage report: ${this.baseUrl}: ${(err as Error).message}`, true, { cause: err });
    }
    if (res.ok || res.status === 404) return;
    // The control plane says why (an unaccepted token, a service account not allowed): pass it on.
    const why = await res
      .json()
      .then((b) => (b as { error?: { message?: string } }).error?.message)
      // A body that is not JSON: the status alone goes into the error thrown below.
      .catch(() => undefined);
    throw new UsageReportError(
      `usage report: HTTP ${res.status} from ${this.baseUrl}${why ? `: ${why}` : ''}`,
      isRetryableStatus(res.status),
    );
  }
}

/*
 * A DRA claim's use, billed per share (pure). The ledger holds a claim as one row per allocated
 * share (`claim:<uid>`, the share's key as its container), while the node prepares one budget per
 * card for the whole claim: its region measures the claim on the card, not each share. So the
 * card's figures are split among the shares on it, the SM share by the cores each consumed and
 * memory by the memory each consumed, in whole basis points and bytes (largest remainder), so the
 * parts always add up to what was measured.
 */
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
