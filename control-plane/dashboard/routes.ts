/**
 * The dashboard's HTTP surface, mounted at `/` by the control plane: the page and its assets
 * (served from this folder, no CDN), `/ui/overview` (JSON) and `/ui/stream` (Server-Sent Events
 * that push a new overview whenever the numbers change).
 */
import { readFileSync } from 'node:fs';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../../contract/index.js';
import { buildOverview, defaultOverviewOptions, type Overview, type OverviewOptions } from './overview.js';
import type { DashboardSource } from './source.js';

export type DashboardDeps = {
  source: DashboardSource;
  clock: () => Date;
  /** Default report window when the page does not ask for one. */
  reportWindowMs?: number;
  /** Overviews younger than this are shared between requests, so many open pages cost one query. */
  cacheMs?: number;
  /** How often an open stream looks for changes. */
  streamIntervalMs?: number;
  /** A change of the reports alone is pushed at most this often (a whole overview can be megabytes). */
  reportPushMs?: number;
  refusalLimit?: number;
  overview?: Partial<OverviewOptions>;
};

const HOUR_MS = 3_600_000;

const overviewQuery = z.object({
  windowHours: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 90)
    .optional(),
  /** One cluster of a shared ledger; absent or empty: all. */
  cluster: z.string().max(253).optional(),
});

type OverviewRequest = { windowMs: number; cluster?: string };

function asset(name: string): string {
  return readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');
}

// Everything the page loads comes from this origin; the CSP makes a stray external URL fail loudly.
const securityHeaders = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** Loads overviews, sharing one load per window among callers within `cacheMs`. */
export function createOverviewLoader(deps: DashboardDeps): (req: OverviewRequest) => Promise<Overview> {
  const cacheMs = deps.cacheMs ?? 1000;
  const opts = { ...defaultOverviewOptions, ...deps.overview };
  const cache = new Map<string, { atMs: number; value: Promise<Overview> }>();
  return ({ windowMs, cluster }) => {
    const now = deps.clock();
    const key = `${windowMs}|${cluster ?? ''}`;
    const hit = cache.get(key);
    if (hit && now.getTime() - hit.atMs < cacheMs) return hit.value;
    const window = { from: new Date(now.getTime() - windowMs), to: now };
    const value = Promise.all([
      deps.source.readClusters(),
      deps.source.readQuotas(),
      deps.source.readReports(window),
      deps.source.readRefusals(deps.refusalLimit ?? 50),
    ]).then(([clusters, quotas, reports, refusals]) =>
      buildOverview({ clusters, quotas, reports, refusals, window, now, ...(cluster ? { cluster } : {}) }, opts),
    );
    // Old windows and clusters nobody asks for any more must not pile up.
    for (const [k, v] of cache) if (now.getTime() - v.atMs >= cacheMs) cache.delete(k);
    cache.set(key, { atMs: now.getTime(), value });
    // A failed load must not stick for cacheMs.
    value.catch(() => cache.delete(key));
    return value;
  };
}

function parseRequest(query: Record<string, string>, defaultMs: number): OverviewRequest {
  const parsed = overviewQuery.safeParse(query);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues, 'query'), 'dashboard query');
  const windowMs = parsed.data.windowHours ? parsed.data.windowHours * HOUR_MS : defaultMs;
  return parsed.data.cluster ? { windowMs, cluster: parsed.data.cluster } : { windowMs };
}

/**
 * What decides a push: `now` (the capacity, quotas, refusals: pushed at once when they change) and
 * `reports` (GPU-hours grow every minute a pod runs: pushed at most every `reportPushMs`). The
 * timestamp and the window's bounds move on every load and never count.
 */
function fingerprints(o: Overview): { now: string; reports: string } {
  return {
    now: JSON.stringify({ ...o, generatedAt: '', window: null, reports: null }),
    reports: JSON.stringify(o.reports),
  };
}

/** How long the page waits for its first state before it is served without one (the stream brings it). */
const FIRST_PAINT_DEADLINE_MS = 2000;

function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no overview within ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * The page with its first overview in a JSON data block (never executed, so the CSP's
 * script-src 'self' still holds); `<` is escaped so no value can close the element.
 */
export function withInitialOverview(page: string, overview: Overview | undefined): string {
  if (!overview) return page;
  const json = JSON.stringify(overview).replaceAll('<', '\\u003c');
  return page.replace('</head>', `<script type="application/json" id="initial-overview">${json}</script>\n  </head>`);
}

export function dashboardRoutes(deps: DashboardDeps): Hono {
  const page = asset('index.html');
  const script = asset('app.js');
  const style = asset('app.css');
  const load = createOverviewLoader(deps);
  const defaultWindowMs = deps.reportWindowMs ?? 24 * HOUR_MS;
  const intervalMs = deps.streamIntervalMs ?? 2000;
  const reportPushMs = deps.reportPushMs ?? 30_000;

  const favicon = asset('favicon.svg');
  const app = new Hono();
  // The first state comes with the page, so it paints without the stream (screenshots, slow proxies).
  app.get('/', async (c) => {
    const initial = await withDeadline(load({ windowMs: defaultWindowMs }), FIRST_PAINT_DEADLINE_MS).catch(
      () => undefined,
    );
    return c.html(withInitialOverview(page, initial), 200, { ...securityHeaders, 'cache-control': 'no-cache' });
  });
  app.get('/ui/favicon.svg', (c) =>
    c.body(favicon, 200, { ...securityHeaders, 'content-type': 'image/svg+xml', 'cache-control': 'max-age=86400' }),
  );
  app.get('/ui/app.js', (c) =>
    c.body(script, 200, { ...securityHeaders, 'content-type': 'text/javascript; charset=utf-8' }),
  );
  app.get('/ui/app.css', (c) => c.body(style, 200, { ...securityHeaders, 'content-type': 'text/css; charset=utf-8' }));
  app.get('/ui/overview', async (c) => {
    const overview = await load(parseRequest(c.req.query(), defaultWindowMs));
    return c.json(overview, 200, { 'cache-control': 'no-store' });
  });
  app.get('/ui/stream', (c) => {
    const request = parseRequest(c.req.query(), defaultWindowMs);
    return streamSSE(c, async (stream) => {
      let last = { now: '', reports: '' };
      let lastPushMs = Number.NEGATIVE_INFINITY;
      let id = 0;
      while (!stream.aborted && !stream.closed) {
        try {
          const overview = await load(request);
          const print = fingerprints(overview);
          const nowMs = deps.clock().getTime();
          const reportsDue = print.reports !== last.reports && nowMs - lastPushMs >= reportPushMs;
          if (print.now !== last.now || reportsDue) {
            last = print;
            lastPushMs = nowMs;
            await stream.writeSSE({ event: 'overview', id: String(++id), data: JSON.stringify(overview) });
          } else {
            // A comment line keeps proxies from closing an idle stream.
            await stream.write(': unchanged\n\n');
          }
        } catch (err) {
          await stream.writeSSE({ event: 'failure', data: JSON.stringify({ message: String(err) }) });
        }
        await stream.sleep(intervalMs);
      }
    });
  });
  return app;
}
