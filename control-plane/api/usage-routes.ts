/**
 * `POST /usage` (mounted under `/api/v1`): node agents report per-container usage every period;
 * the samples go into the ledger's usage table, where reports turn them into GPU-hours used and
 * idle allocations. A node agent reports only its own node's pods and cards (usage-writer.ts);
 * a sample posted again counts once, and one from the future is refused.
 */
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { fieldError, fieldErrorsFromZod, ValidationError, VcudaError } from '../../contract/index.js';
import { withDeadline } from '../../db/deadline.js';
import { isLedgerUnreachable } from '../../db/pg-errors.js';
import type { RecordedUsage, UsageSample } from '../../db/usage.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import type { Caller } from './caller-auth.js';
import { burstKey, judgeSample, memoizedGrants, type PodGrants, type PodLookup, writerNodeOf } from './usage-writer.js';

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
  clock?: () => Date;
  /**
   * The node agents' sampling interval (their `usagePeriodMs`), seconds: a sample claiming a
   * longer period than this plus SAMPLE_PERIOD_SLACK is refused. Default 10.
   */
  samplePeriodS?: number;
  /** How long a write may take before the answer is 503 (the write may still commit; a retry then counts once). */
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

/** The samples of `report` this writer may record; refuses the report if any is another node's. */
function ownSamples(deps: UsageRoutesDeps, caller: Caller | undefined, report: UsageReport) {
  const pods = deps.pods;
  if (caller) {
    const node = writerNodeOf(caller, pods ?? (() => undefined));
    if (node !== report.node) {
      throw new VcudaError(
        'forbidden',
        `usage report: node ${report.node}: the caller's token speaks for node ${node}`,
      );
    }
  }
  if (!pods) return { own: report.samples, unknown: 0 };
  const own: UsageReport['samples'] = [];
  const refused: string[] = [];
  const grants = memoizedGrants(deps.grants ?? (() => undefined));
  report.samples.forEach((s, i) => {
    const verdict = judgeSample(report.node, s, pods, grants);
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

/** The write, with a deadline; an unreachable ledger is `unavailable` (503 and Retry-After: the agent retries). */
async function writeUsage(deps: UsageRoutesDeps, samples: UsageSample[]): Promise<RecordedUsage> {
  try {
    return await withDeadline(deps.usage.recordUsage(samples), deps.writeTimeoutMs ?? 5000, 'usage report');
  } catch (err) {
    if (!(err instanceof VcudaError) && isLedgerUnreachable(err)) {
      throw new VcudaError('unavailable', 'usage report: the ledger cannot be reached; retry later', { cause: err });
    }
    throw err;
  }
}

/**
 * The most of its card a container can have used, percent: its core limit (a soft limit's burst)
 * from the verified assignment; a whole card when the cluster view is not consulted.
 */
function mostOfCard(
  deps: UsageRoutesDeps,
  grants: (pod: PodWithStatus) => PodGrants | undefined,
  s: UsageReport['samples'][number],
): number {
  const pod = deps.pods?.(s.namespace, s.pod);
  const limit = pod ? grants(pod)?.coreLimitByContainer.get(s.container) : undefined;
  return limit ?? 100;
}

/**
 * The sample's burst as stored, clamped to what its assignment allows above the guarantee
 * (vcuda-memory-limit minus vcuda-memory; 0 without one). The region these figures come from is
 * writable by the tenant's own process, so a figure above the contract is clamped, not refused:
 * refusing would let one container void its whole node's report. MiB round up, so any burst shows.
 */
function burstOf(
  deps: UsageRoutesDeps,
  grants: (pod: PodWithStatus) => PodGrants | undefined,
  s: UsageReport['samples'][number],
): Pick<UsageSample, 'memoryBurstMiB' | 'memoryBurstEvictedMiB' | 'burstEvicted' | 'burstEvictions'> {
  const pod = deps.pods?.(s.namespace, s.pod);
  const granted = pod ? grants(pod) : undefined;
  const most = granted ? (granted.burstBytesByCard.get(burstKey(s.container, s.cardUuid)) ?? 0) : Number.MAX_VALUE;
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
    const { own, unknown } = ownSamples(deps, c.get('caller'), report);
    const periodMs = Math.round(report.periodS * 1000);
    const sampledAt = new Date(new Date(report.at).getTime() - periodMs);
    const grants = memoizedGrants(deps.grants ?? (() => undefined));
    // A container not yet measured (smShare null) has no SM figure to record; its memory alone
    // would read as an idle allocation, so it waits for its first measured period.
    const measured = own.filter((s) => s.smShare !== null);
    const samples: UsageSample[] = measured.map((s) => ({
      cluster: deps.clusterName,
      namespace: s.namespace,
      podUid: s.podUid,
      container: s.container,
      cardUuid: s.cardUuid,
      sampledAt,
      periodS: periodMs / 1000,
      smPct: Math.min((s.smShare ?? 0) * 100, mostOfCard(deps, grants, s)),
      memoryUsedMiB: Math.floor(s.memoryUsedBytes / MIB),
      ...burstOf(deps, grants, s),
    }));
    const { recorded, duplicate, outsideAllocation } = await writeUsage(deps, samples);
    return c.json({ recorded, duplicate, outsideAllocation, unknown, skipped: own.length - measured.length });
  });
  return app;
}
