/**
 * `GET /reports` and `GET /reports/:name?format=json|csv&since&until&cluster&...` (mounted
 * under `/api/v1`). Only translates HTTP to a report run; the queries live in `db/reports.ts`.
 * Errors go to the app's one error exit (unknown report 404, bad parameter 400).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../../contract/index.js';
import { formatCsv, type Report, type ReportParams } from '../../db/reports.js';

/** What the routes need: a runner that knows the report names and runs one. */
export type ReportsSource = {
  names: readonly string[];
  run: (name: string, params: ReportParams) => Promise<Report>;
};

/**
 * `idleDefaults`: the idle report's thresholds when the query gives none, the dashboard's own, so
 * `vcuda report idle --url` lists what the dashboard's idle view shows.
 */
export type ReportsRoutesDeps = { reports: ReportsSource; idleDefaults?: { idleForMinutes: number } };

const querySchema = z.object({
  format: z.enum(['json', 'csv']).default('json'),
  since: z.string().optional(),
  until: z.string().optional(),
  cluster: z.string().optional(),
  groupBy: z.enum(['pod', 'namespace', 'team', 'cluster']).optional(),
  idleBelowPct: z.string().optional(),
  idleForMinutes: z.string().optional(),
  limit: z.string().optional(),
});

export function reportsRoutes(deps: ReportsRoutesDeps): Hono {
  const app = new Hono();
  app.get('/reports', (c) => c.json({ reports: deps.reports.names }));
  app.get('/reports/:name', async (c) => {
    const parsed = querySchema.safeParse(c.req.query());
    if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'query');
    const { format, ...params } = parsed.data;
    const defined = Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined)) as ReportParams;
    if (c.req.param('name') === 'idle' && deps.idleDefaults && defined.idleForMinutes === undefined)
      Object.assign(defined, { idleForMinutes: String(deps.idleDefaults.idleForMinutes) });
    const report = await deps.reports.run(c.req.param('name'), defined);
    if (format === 'csv') {
      return c.body(formatCsv(report), 200, {
        'content-type': 'text/csv; charset=utf-8',
        'content-disposition': `attachment; filename="${report.name}.csv"`,
      });
    }
    return c.json(report);
  });
  return app;
}
