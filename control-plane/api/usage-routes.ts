/**
 * `POST /usage` (mounted under `/api/v1`): node agents report per-container usage every period;
 * the samples go into the ledger's usage table, where reports turn them into GPU-hours used and
 * idle allocations. Only translates the node agent's wire shape into the ledger's samples.
 */
import { Hono, type MiddlewareHandler } from 'hono';
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../../contract/index.js';
import type { UsageSample } from '../../db/usage.js';

const MIB = 1024 * 1024;
/** A node of 16 cards with a few hundred containers stays far below this. */
const MAX_SAMPLES = 10_000;
const name = z.string().min(1).max(253);

/** What a node agent sends (`node-agent/usage.ts`). */
export const usageReportSchema = z.object({
  node: name,
  at: z.iso.datetime(),
  /** Seconds the samples cover; node agents send their reporting period. */
  periodS: z.number().positive().max(3600).default(10),
  samples: z
    .array(
      z.object({
        podUid: name,
        namespace: name,
        pod: name,
        container: name,
        cardUuid: name,
        memoryUsedBytes: z.number().int().min(0),
        memoryLimitBytes: z.number().int().min(0),
        coreRequest: z.number().int().min(1).max(100),
        coreLimit: z.number().int().min(1).max(100),
        smShare: z.number().min(0).max(1).nullable(),
      }),
    )
    .max(MAX_SAMPLES),
});

export type UsageRoutesDeps = {
  clusterName: string;
  usage: { recordUsage: (samples: UsageSample[]) => Promise<void> };
  /** Who may write (caller-auth.ts); absent: whoever reaches the port. */
  guard?: MiddlewareHandler;
};

export function usageRoutes(deps: UsageRoutesDeps): Hono {
  const app = new Hono();
  if (deps.guard) app.use('/usage', deps.guard);
  app.post('/usage', async (c) => {
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      throw new ValidationError([{ path: '(body)', rule: 'json', message: '(body): not valid JSON' }], 'usage report');
    }
    const parsed = usageReportSchema.safeParse(body);
    if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'usage report');
    const report = parsed.data;
    const sampledAt = new Date(report.at);
    // A container not yet measured (smShare null) has no SM figure to record; its memory alone
    // would read as an idle allocation, so it waits for its first measured period.
    const samples: UsageSample[] = report.samples
      .filter((s) => s.smShare !== null)
      .map((s) => ({
        cluster: deps.clusterName,
        namespace: s.namespace,
        podUid: s.podUid,
        container: s.container,
        cardUuid: s.cardUuid,
        sampledAt,
        periodS: report.periodS,
        smPct: (s.smShare ?? 0) * 100,
        memoryUsedMiB: Math.floor(s.memoryUsedBytes / MIB),
      }));
    await deps.usage.recordUsage(samples);
    return c.json({ recorded: samples.length, skipped: report.samples.length - samples.length });
  });
  return app;
}
