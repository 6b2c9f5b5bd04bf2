/**
 * `POST /usage` (mounted under `/api/v1`): node agents report per-container usage every period;
 * the samples go into the ledger's usage table, where reports turn them into GPU-hours used and
 * idle allocations. A node agent reports only its own node's pods and cards, and the shares of DRA
 * claims the ledger charged on its node (usage-writer.ts); a sample posted again counts once, and
 * one from the future is refused.
 */
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { fieldError, fieldErrorsFromZod, isClaimHolder, ValidationError, VcudaError } from '../../contract/index.js';
import { withDeadline } from '../../db/deadline.js';
import type { ClaimShareRow } from '../../db/ledger.js';
import { isLedgerUnreachable } from '../../db/pg-errors.js';
import type { RecordedUsage, UsageSample } from '../../db/usage.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import type { Caller } from './caller-auth.js';
import {
  burstKey,
  judgeClaimSample,
  judgeSample,
  memoizedGrants,
  type PodGrants,
  type PodLookup,
  writerNodeOf,
} from './usage-writer.js';

const MIB = 1024 * 1024;
/** A node of 16 cards with a few hundred containers stays far below this. */
const MAX_SAMPLES = 10_000;
const name = z.string().min(1).max(253);

/** Bytes of memory: a petabyte is beyond any card, and MiB of it fit the table's int4. */
const bytes = z
  .number()
  .int()
  .min(0)
  .max(2 ** 50);
/** The node agents measure shares in basis points: anything finer is not a measurement. */
const MIN_NONZERO_SHARE = 0.0001;

/** What a node agent sends (`node-agent/usage.ts`). */
export const usageReportSchema = z.object({
  node: name,
  /** When the period the samples cover ended. */
  at: z.iso.datetime(),
  /** Seconds the samples cover; node agents send their reporting period. At least a millisecond. */
  periodS: z.number().min(0.001).max(3600).default(10),
  samples: z
    .array(
      z.object({
        podUid: name,
        namespace: name,
        pod: name,
        container: name,
        cardUuid: name,
        memoryUsedBytes: bytes,
        memoryLimitBytes: bytes,
        coreRequest: z.number().int().min(1).max(100),
        coreLimit: z.number().int().min(1).max(100),
        /** What the node agent reads of a burst (vcuda-memory-limit) from the container's region. */
        memoryBurstBytes: bytes.optional(),
        memoryBurstEvictedBytes: bytes.optional(),
        memoryBurstEvictions: z
          .number()
          .int()
          .min(0)
          .max(2 ** 31 - 1)
          .optional(),
        smShare: z
          .number()
          .min(0)
          .max(1)
          .refine((v) => v === 0 || v >= MIN_NONZERO_SHARE, { message: `must be 0 or at least ${MIN_NONZERO_SHARE}` })
          .nullable(),
      }),
    )
    .max(MAX_SAMPLES),
});
type UsageReport = z.infer<typeof usageReportSchema>;

export type UsageRoutesDeps = {
  clusterName: string;
  usage: { recordUsage: (samples: UsageSample[]) => Promise<RecordedUsage> };
  /** Who may write (caller-auth.ts); absent: whoever reaches the port, for the node it names. */
  guard?: MiddlewareHandler;
  /**
   * The cluster's pods as the control plane sees them: a sample must be of a pod assigned to the
   * writer's node, on a card granted to its container. Absent (no cluster): not checked.
   */
  pods?: PodLookup;
  /** What a pod's verified assignment grants (required with `pods`). */
  grants?: (pod: PodWithStatus) => PodGrants | undefined;
  /**
   * The shares the ledger charged to these DRA claim holders (`claim:<uid>`, db `claimShares`): a
   * claim's sample must be of a share charged on the writer's node. Absent: a claim's sample is
   * recorded unchecked only where nothing is checked (no `pods` either), else not recorded.
   */
  claims?: (holders: readonly string[]) => Promise<ClaimShareRow[]>;
  clock?: () => Date;
  /**
   * The node agents' sampling interval (their `usagePeriodMs`), seconds: a sample claiming a
   * longer period than this plus SAMPLE_PERIOD_SLACK is refused. Default 10.
   */
  samplePeriodS?: number;
  /**
   * How long the report's ledger calls (reading claims' charges, the write) may take before the
   * answer is 503 (the write may still commit; a retry then counts once).
   */
  writeTimeoutMs?: number;
};

/** A report's period may exceed the configured interval by half (a slow tick), never by more. */
const SAMPLE_PERIOD_SLACK = 1.5;

/** A node agent's clock may run a little ahead; a sample from further in the future is refused. */
const MAX_FUTURE_MS = 60_000;
/**
 * Raw samples older than a day are rolled up (db/usage.ts), after which a copy posted again could
 * no longer be told from the original: older reports are refused, so a sample counts once.
 */
const MAX_AGE_MS = 23 * 3_600_000;

function refuseAt(rule: string, detail: string): never {
  throw new ValidationError([fieldError('at', rule, detail)], 'usage report');
}

async function readReport(c: Context, now: Date, maxPeriodS: number): Promise<UsageReport> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new ValidationError([fieldError('(body)', 'json', 'not valid JSON')], 'usage report');
  }
  const parsed = usageReportSchema.safeParse(body);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'usage report');
  const at = new Date(parsed.data.at).getTime();
  if (at > now.getTime() + MAX_FUTURE_MS) refuseAt('not-future', `${parsed.data.at} is more than a minute ahead`);
  if (at < now.getTime() - MAX_AGE_MS) refuseAt('too-old', `${parsed.data.at} is more than 23 hours old`);
  if (parsed.data.periodS > maxPeriodS) {
    throw new ValidationError(
      [fieldError('periodS', 'at-most-sampling-interval', `${parsed.data.periodS} s is longer than ${maxPeriodS} s`)],
      'usage report',
    );
  }
  return parsed.data;
}

type ReportedSample = UsageReport['samples'][number];

/** Judges one sample: a pod's against the cluster view, a claim's against the ledger's charges. */
type SampleJudge = (s: ReportedSample) => 'own' | 'unknown' | { refused: string };

async function judgeOf(deps: UsageRoutesDeps, report: UsageReport): Promise<SampleJudge | undefined> {
  const { pods, claims } = deps;
  if (!pods && !claims) return undefined;
  const grants = memoizedGrants(deps.grants ?? (() => undefined));
  const holders = [...new Set(report.samples.map((s) => s.podUid).filter(isClaimHolder))];
  const holds = claims && holders.length > 0 ? await claims(holders) : [];
  return (s) => {
    // A pod UID never holds a colon: a `claim:` sample is a claim's, whatever pod shares its name.
    if (isClaimHolder(s.podUid)) return claims ? judgeClaimSample(report.node, s, holds) : 'unknown';
    return pods ? judgeSample(report.node, s, pods, grants) : 'own';
  };
}

/** The samples of `report` this writer may record; refuses the report if any is another node's or holder's. */
async function ownSamples(deps: UsageRoutesDeps, caller: Caller | undefined, report: UsageReport) {
  if (caller) {
    const node = writerNodeOf(caller, deps.pods ?? (() => undefined));
    if (node !== report.node) {
      throw new VcudaError(
        'forbidden',
        `usage report: node ${report.node}: the caller's token speaks for node ${node}`,
      );
    }
  }
  const judge = await judgeOf(deps, report);
  if (!judge) return { own: report.samples, unknown: 0 };
  const own: ReportedSample[] = [];
  const refused: string[] = [];
  report.samples.forEach((s, i) => {
    const verdict = judge(s);
    if (verdict === 'own') own.push(s);
    else if (verdict !== 'unknown') refused.push(`samples[${i}]: ${verdict.refused}`);
  });
  if (refused.length > 0) {
    const more = refused.length > 5 ? `\n... and ${refused.length - 5} more` : '';
    throw new VcudaError(
      'forbidden',
      `usage report from node ${report.node}:\n${refused.slice(0, 5).join('\n')}${more}`,
    );
  }
  return { own, unknown: report.samples.length - own.length };
}

/**
 * A ledger call of the report (reading claims' charges, writing samples) before the report's one
 * deadline (`performance.now()` milliseconds); an unreachable ledger is `unavailable` (503 and
 * Retry-After: the agent retries).
 */
async function onLedger<T>(work: Promise<T>, deadlineMs: number): Promise<T> {
  try {
    return await withDeadline(work, Math.max(1, Math.round(deadlineMs - performance.now())), 'usage report');
  } catch (err) {
    if (!(err instanceof VcudaError) && isLedgerUnreachable(err)) {
      throw new VcudaError('unavailable', 'usage report: the ledger cannot be reached; retry later', { cause: err });
    }
    throw err;
  }
}

/** How far a sample's figures may go: the most of its card (percent) and burst bytes above its guarantee. */
type SampleBounds = { mostPct: number; burstBytes: number };

/**
 * A pod's bounds come from its verified assignment: its core limit (a soft limit's burst) and
 * vcuda-memory-limit minus vcuda-memory; a whole card and no clamp when the cluster view is not
 * consulted. A claim's core limit is the one its node agent prepared it with (the claim's own
 * opaque config, from the allocation kube-scheduler wrote; the ledger does not keep it), and a
 * claim has no memory above what it consumed.
 */
function boundsOf(
  deps: UsageRoutesDeps,
  grants: (pod: PodWithStatus) => PodGrants | undefined,
  s: ReportedSample,
): SampleBounds {
  if (isClaimHolder(s.podUid)) return { mostPct: s.coreLimit, burstBytes: deps.claims ? 0 : Number.MAX_VALUE };
  const pod = deps.pods?.(s.namespace, s.pod);
  const granted = pod ? grants(pod) : undefined;
  return {
    mostPct: granted?.coreLimitByContainer.get(s.container) ?? 100,
    burstBytes: granted ? (granted.burstBytesByCard.get(burstKey(s.container, s.cardUuid)) ?? 0) : Number.MAX_VALUE,
  };
}

/**
 * The sample's burst as stored, clamped to what its bounds allow above the guarantee. The region
 * these figures come from is writable by the tenant's own process, so a figure above the contract
 * is clamped, not refused: refusing would let one container void its whole node's report. MiB
 * round up, so any burst shows.
 */
function burstOf(
  s: ReportedSample,
  most: number,
): Pick<UsageSample, 'memoryBurstMiB' | 'memoryBurstEvictedMiB' | 'burstEvicted' | 'burstEvictions'> {
  const burst = Math.min(s.memoryBurstBytes ?? 0, most);
  const evicted = Math.min(s.memoryBurstEvictedBytes ?? 0, burst);
  return {
    memoryBurstMiB: Math.ceil(burst / MIB),
    memoryBurstEvictedMiB: Math.ceil(evicted / MIB),
    burstEvicted: evicted > 0,
    // A container with nothing to burst has nothing evicted, whatever its region says.
    burstEvictions: most > 0 ? (s.memoryBurstEvictions ?? 0) : 0,
  };
}

export function usageRoutes(deps: UsageRoutesDeps): Hono {
  const app = new Hono();
  const clock = deps.clock ?? (() => new Date());
  const maxPeriodS = (deps.samplePeriodS ?? 10) * SAMPLE_PERIOD_SLACK;
  if (deps.guard) app.use('/usage', deps.guard);
  app.post('/usage', async (c) => {
    const report = await readReport(c, clock(), maxPeriodS);
    const deadlineMs = performance.now() + (deps.writeTimeoutMs ?? 5000);
    const { own, unknown } = await onLedger(ownSamples(deps, c.get('caller'), report), deadlineMs);
    const periodMs = Math.round(report.periodS * 1000);
    const sampledAt = new Date(new Date(report.at).getTime() - periodMs);
    const grants = memoizedGrants(deps.grants ?? (() => undefined));
    // A container not yet measured (smShare null) has no SM figure to record; its memory alone
    // would read as an idle allocation, so it waits for its first measured period.
    const measured = own.filter((s) => s.smShare !== null);
    const samples: UsageSample[] = measured.map((s) => {
      const bounds = boundsOf(deps, grants, s);
      return {
        cluster: deps.clusterName,
        namespace: s.namespace,
        podUid: s.podUid,
        container: s.container,
        cardUuid: s.cardUuid,
        sampledAt,
        periodS: periodMs / 1000,
        smPct: Math.min((s.smShare ?? 0) * 100, bounds.mostPct),
        memoryUsedMiB: Math.floor(s.memoryUsedBytes / MIB),
        ...burstOf(s, bounds.burstBytes),
      };
    });
    const { recorded, duplicate, outsideAllocation } = await onLedger(deps.usage.recordUsage(samples), deadlineMs);
    return c.json({ recorded, duplicate, outsideAllocation, unknown, skipped: own.length - measured.length });
  });
  return app;
}
