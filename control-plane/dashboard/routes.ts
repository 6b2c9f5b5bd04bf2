/**
 * The dashboard's HTTP surface, mounted at `/` by the control plane: the page and its assets
 * (served from this folder, no CDN), `/ui/overview` (JSON) and `/ui/stream` (Server-Sent Events
 * that push a new overview whenever the numbers change).
 *
 * What a caller can make it hold is bounded: windows come from a fixed set, a cluster must be
 * one the ledger knows (anything else is a 400 before any load), the ledger is read once per
 * window and `cacheMs` whatever the cluster, and open streams are capped (`maxStreams`).
 */
import { readFileSync } from 'node:fs';
import { ServerResponse } from 'node:http';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../../contract/index.js';
import { withDeadline } from '../../db/deadline.js';
import {
  buildOverview,
  defaultOverviewOptions,
  type Overview,
  type OverviewInput,
  type OverviewOptions,
} from './overview.js';
import type { DashboardSource } from './source.js';
import { nodeResponseSink, type PrintedOverview, streamTicker, webStreamSink } from './stream-ticker.js';

export type DashboardDeps = {
  source: DashboardSource;
  clock: () => Date;
  /** Default report window when the page does not ask for one. */
  reportWindowMs?: number;
  /**
   * Overviews younger than this are shared between requests, so many open pages cost one read of
   * the ledger (default: the stream interval; each stream looks once per interval, so a shorter
   * cache only read the ledger again for the streams of a later slot of the same interval).
   */
  cacheMs?: number;
  /** The reports (GPU-hours, idle time) are read again at most this often (default 10 s). */
  reportsCacheMs?: number;
  /** How often an open stream looks for changes. */
  streamIntervalMs?: number;
  /**
   * Where in the interval each stream's ticks fall, as a fraction in [0, 1) drawn once per stream
   * (default Math.random; tests pin it): it picks one of the interval's slots (streamTicker).
   * Streams opened together (a page per viewer after a restart, or a load test) would otherwise
   * all tick in the same millisecond every interval.
   */
  streamPhase?: () => number;
  /** A change of the reports alone is pushed at most this often (a whole overview can be megabytes). */
  reportPushMs?: number;
  /**
   * A stream with nothing new for this long gets a comment line (default 15 s), so proxies keep it
   * open; the page ignores it. One every tick was a write every 2 s per open page, on the event loop
   * the admission reviews share.
   */
  streamKeepAliveMs?: number;
  refusalLimit?: number;
  overview?: Partial<OverviewOptions>;
  /** Open `/ui/stream` connections at most; more get 503 with Retry-After (default 64). */
  maxStreams?: number;
  /** Of those, at most this many from one client address, so no one client takes every slot (default 8). */
  maxStreamsPerClient?: number;
  /** How old the list of clusters the ledger knows may get before it is read again (default 30 s). */
  clusterListMs?: number;
  /** An overview not loaded within this is a 503, or a `failure` event on a stream (default 10 s). */
  loadTimeoutMs?: number;
};

const HOUR_MS = 3_600_000;

/** The report windows offered, in hours: 1 h, 6 h, a day, a week, 30 and 90 days. */
const WINDOW_HOURS = [1, 6, 24, 168, 720, 2160] as const;

/** A refused stream is told to come back after this many seconds. */
const STREAM_RETRY_AFTER_S = 10;

const overviewQuery = z.object({
  windowHours: z.coerce
    .number()
    .refine((h) => (WINDOW_HOURS as readonly number[]).includes(h), {
      message: `must be one of ${WINDOW_HOURS.join(', ')}`,
    })
    .optional(),
  /** One cluster of a shared ledger; absent or empty: all. */
  cluster: z.string().max(253).optional(),
});

type OverviewRequest = { windowMs: number; cluster?: string };

/** The loader's key for a request: streams with the same key share one load per tick. */
const requestKey = (r: OverviewRequest) => `${r.windowMs}|${r.cluster ?? ''}`;

/**
 * Slots per stream interval (streamTicker): each occupied slot costs one timer and one load per
 * tick, and 300 streams opened together tick in groups of about 20, 125 ms apart at the default 2 s.
 */
const STREAM_SLOTS = 16;

/** How often an open stream looks for changes, unless `streamIntervalMs` says otherwise. */
const DEFAULT_STREAM_INTERVAL_MS = 2000;

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

/** `atMs`: when the read finished; undefined while it is under way. */
type Cached<T> = { atMs: number | undefined; value: Promise<T> };

/**
 * Reads a value at most once per `ttlMs` after the last read finished, shared by every caller; a
 * read under way is shared too, so a slow ledger never has two reads of one key at a time. A
 * failed read is not kept.
 */
function cachedRead<K, T>(clock: () => Date, ttlMs: number, read: (key: K, now: Date) => Promise<T>) {
  const cache = new Map<K, Cached<T>>();
  return (key: K): Promise<T> => {
    const now = clock();
    const hit = cache.get(key);
    if (hit && (hit.atMs === undefined || now.getTime() - hit.atMs < ttlMs)) return hit.value;
    const entry: Cached<T> = { atMs: undefined, value: read(key, now) };
    cache.set(key, entry);
    entry.value.then(
      () => {
        entry.atMs = clock().getTime();
      },
      () => cache.get(key) === entry && cache.delete(key),
    );
    return entry.value;
  };
}

export type OverviewLoader = {
  load(req: OverviewRequest): Promise<Overview>;
  /** Clusters the ledger knows, read again when older than `clusterListMs`. */
  knownClusters(): Promise<ReadonlySet<string>>;
};

/**
 * Loads overviews: the ledger is read once per window and `cacheMs`, and each cluster's view of
 * that read is built once. Callers must pass only known clusters (`knownClusters`), which keeps
 * the views to one per window and known cluster.
 */
export function createOverviewLoader(deps: DashboardDeps): OverviewLoader {
  const opts = { ...defaultOverviewOptions, ...deps.overview };
  const readNow = cachedRead(
    deps.clock,
    deps.cacheMs ?? deps.streamIntervalMs ?? DEFAULT_STREAM_INTERVAL_MS,
    async (windowMs: number, now) => {
      const window = { from: new Date(now.getTime() - windowMs), to: now };
      const [clusters, quotas, refusals, preemptions, unplacedPods] = await Promise.all([
        deps.source.readClusters(),
        deps.source.readQuotas(),
        deps.source.readRefusals(deps.refusalLimit ?? 50),
        deps.source.readPreemptions?.(deps.refusalLimit ?? 50) ?? [],
        deps.source.readUnplacedPods?.() ?? [],
      ]);
      return { clusters, quotas, refusals, preemptions, unplacedPods, window, now };
    },
  );
  // GPU-hours and idle time move by the minute and are pushed at most every reportPushMs: read
  // them every reportsCacheMs, not at every refresh of the cards.
  const readReports = cachedRead(deps.clock, deps.reportsCacheMs ?? 10_000, (windowMs: number, now) =>
    deps.source.readReports({ from: new Date(now.getTime() - windowMs), to: now }),
  );
  // One inputs promise per pair of reads, so a view is rebuilt only when one of them was read again.
  const combined = new Map<number, { now: unknown; reports: unknown; inputs: Promise<OverviewInput> }>();
  const readInputs = (windowMs: number): Promise<OverviewInput> => {
    const now = readNow(windowMs);
    const reports = readReports(windowMs);
    const hit = combined.get(windowMs);
    if (hit?.now === now && hit.reports === reports) return hit.inputs;
    const inputs = Promise.all([now, reports]).then(([read, r]) => ({ ...read, reports: r }) satisfies OverviewInput);
    combined.set(windowMs, { now, reports, inputs });
    return inputs;
  };
  const readKnown = cachedRead(deps.clock, deps.clusterListMs ?? 30_000, async (_: 'all') => {
    return new Set(await deps.source.readClusterNames());
  });
  // Per window and cluster: the view built from the inputs it was built from.
  const views = new Map<string, { inputs: Promise<OverviewInput>; value: Promise<Overview> }>();
  return {
    knownClusters: () => readKnown('all'),
    load({ windowMs, cluster }) {
      const inputs = readInputs(windowMs);
      const key = requestKey({ windowMs, ...(cluster ? { cluster } : {}) });
      const view = views.get(key);
      if (view?.inputs === inputs) return view.value;
      const value = inputs.then((input) => buildOverview({ ...input, ...(cluster ? { cluster } : {}) }, opts));
      views.set(key, { inputs, value });
      return value;
    },
  };
}

/** The query, validated; a cluster the ledger does not know is refused before anything is loaded. */
async function parseRequest(
  query: Record<string, string>,
  defaultMs: number,
  loader: OverviewLoader,
): Promise<OverviewRequest> {
  const parsed = overviewQuery.safeParse(query);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues, 'query'), 'dashboard query');
  const windowMs = parsed.data.windowHours ? parsed.data.windowHours * HOUR_MS : defaultMs;
  const cluster = parsed.data.cluster;
  if (!cluster) return { windowMs };
  const known = await loader.knownClusters();
  if (!known.has(cluster)) {
    const listed = [...known].sort().slice(0, 20);
    const message = `query.cluster: unknown cluster ${JSON.stringify(cluster)}; the ledger knows ${
      listed.length > 0 ? listed.join(', ') : 'none'
    }${known.size > listed.length ? ', …' : ''}`;
    throw new ValidationError([{ path: 'query.cluster', rule: 'known-cluster', message }], 'dashboard query');
  }
  return { windowMs, cluster };
}

/**
 * What decides a push: `now` (the capacity, quotas, refusals: pushed at once when they change) and
 * `reports` (GPU-hours grow every minute a pod runs: pushed at most every `reportPushMs`). The
 * timestamp and the window's bounds move on every load and never count.
 */
function fingerprints(o: Overview, stringify: (v: unknown) => string): { now: string; reports: string } {
  return {
    now: stringify({ ...o, generatedAt: '', window: null, reports: null }),
    reports: stringify(o.reports),
  };
}

const utf8 = new TextEncoder();

/**
 * Every open stream ticks on the same cached overview object, so each overview is fingerprinted,
 * serialized and encoded once for all of them, not once per stream (a whole overview can be
 * megabytes: hundreds of streams serializing it each tick held the event loop, and the webhooks
 * behind it; framing and encoding it per stream, as an SSE helper does, tripled the garbage and
 * stretched the young-generation collections that pause the webhooks to 15-20 ms). The frame
 * carries no per-stream `id`: the page never resumes from one.
 */
export function overviewPrinter(stringify: (v: unknown) => string = JSON.stringify): (o: Overview) => PrintedOverview {
  const printed = new WeakMap<Overview, PrintedOverview>();
  return (o) => {
    const hit = printed.get(o);
    if (hit) return hit;
    let frame: Uint8Array | undefined;
    // JSON.stringify writes no line breaks, so the whole document is one data line.
    const made = {
      print: fingerprints(o, stringify),
      frame: () => (frame ??= utf8.encode(`event: overview\ndata: ${stringify(o)}\n\n`)),
    };
    printed.set(o, made);
    return made;
  };
}

/** How long the page waits for its first state before it is served without one (the stream brings it). */
const FIRST_PAINT_DEADLINE_MS = 2000;

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
  const loader = createOverviewLoader(deps);
  const defaultWindowMs = deps.reportWindowMs ?? 24 * HOUR_MS;
  const loadTimeoutMs = deps.loadTimeoutMs ?? 10_000;
  // A silent ledger gets the page a 503 or a failure event (shown as reconnecting), not a hang.
  const loadInTime = (request: OverviewRequest) =>
    withDeadline(loader.load(request), loadTimeoutMs, 'dashboard overview');
  const slots = streamSlots(deps.maxStreams ?? 64, deps.maxStreamsPerClient ?? 8);
  const ticker = streamTicker(loadInTime, requestKey, {
    print: overviewPrinter(),
    clock: deps.clock,
    intervalMs: deps.streamIntervalMs ?? DEFAULT_STREAM_INTERVAL_MS,
    slots: STREAM_SLOTS,
    reportPushMs: deps.reportPushMs ?? 30_000,
    keepAliveMs: deps.streamKeepAliveMs ?? 15_000,
    phase: deps.streamPhase ?? Math.random,
  });

  const app = new Hono();
  servePage(app, loader, defaultWindowMs);
  app.get('/ui/overview', async (c) => {
    const overview = await loadInTime(await parseRequest(c.req.query(), defaultWindowMs, loader));
    return c.json(overview, 200, { 'cache-control': 'no-store' });
  });
  app.get('/ui/stream', async (c) => {
    const request = await parseRequest(c.req.query(), defaultWindowMs, loader);
    const client = clientAddressOf(c.env);
    const release = slots.take(client);
    if (typeof release === 'string') {
      const message =
        release === 'client'
          ? `${slots.openBy(client)} dashboard streams are open from ${client}, the most one client may hold; retry later`
          : `${slots.open()} dashboard streams are open, the most this replica serves; retry later`;
      return c.json({ error: { code: 'unavailable', message } }, 503, {
        'retry-after': String(STREAM_RETRY_AFTER_S),
      });
    }
    const outgoing = nodeResponseOf(c.env);
    if (outgoing) {
      // Under Node's HTTP/1.1 server the frames go to the response itself (see StreamSink).
      const sink = nodeResponseSink(outgoing, securityHeaders);
      // A closed page frees its slot at once, not at the ticker's next turn.
      sink.onClose(release);
      void ticker.serve(sink, request).finally(release);
      return RESPONSE_ALREADY_SENT;
    }
    return streamSSE(c, async (stream) => {
      stream.onAbort(release);
      try {
        await ticker.serve(webStreamSink(stream), request);
      } finally {
        release();
      }
    });
  });
  return app;
}

/** The page and its assets, read once; the first state comes with the page, so it paints without the stream. */
function servePage(app: Hono, loader: OverviewLoader, defaultWindowMs: number): void {
  const page = asset('index.html');
  const script = asset('app.js');
  const style = asset('app.css');
  const favicon = asset('favicon.svg');
  app.get('/', async (c) => {
    // A late or failing ledger costs only the first paint: the page comes empty and the stream fills it.
    const initial = await withDeadline(
      loader.load({ windowMs: defaultWindowMs }),
      FIRST_PAINT_DEADLINE_MS,
      'first overview',
    ).catch(() => undefined);
    return c.html(withInitialOverview(page, initial), 200, { ...securityHeaders, 'cache-control': 'no-cache' });
  });
  app.get('/ui/favicon.svg', (c) =>
    c.body(favicon, 200, { ...securityHeaders, 'content-type': 'image/svg+xml', 'cache-control': 'max-age=86400' }),
  );
  app.get('/ui/app.js', (c) =>
    c.body(script, 200, { ...securityHeaders, 'content-type': 'text/javascript; charset=utf-8' }),
  );
  app.get('/ui/app.css', (c) => c.body(style, 200, { ...securityHeaders, 'content-type': 'text/css; charset=utf-8' }));
}

/** The Node HTTP/1.1 response behind a request served by `@hono/node-server`, if any. */
function nodeResponseOf(env: unknown): ServerResponse | undefined {
  const outgoing = (env as { outgoing?: unknown } | undefined)?.outgoing;
  return outgoing instanceof ServerResponse ? outgoing : undefined;
}

/** The address a request came from (behind `kubectl port-forward`, every viewer is 127.0.0.1). */
function clientAddressOf(env: unknown): string {
  const incoming = (env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming;
  return incoming?.socket?.remoteAddress ?? 'unknown';
}

type StreamSlots = {
  open(): number;
  openBy(client: string): number;
  /** The slot's release, or which cap refused it. */
  take(client: string): (() => void) | 'all' | 'client';
};

/**
 * `max` streams in all, `perClient` from any one client address. A slot's release counts once however
 * often it is called: both the close listener and the end of the stream call it.
 */
function streamSlots(max: number, perClient: number): StreamSlots {
  let open = 0;
  const byClient = new Map<string, number>();
  return {
    open: () => open,
    openBy: (client) => byClient.get(client) ?? 0,
    take: (client) => {
      const mine = byClient.get(client) ?? 0;
      if (mine >= perClient) return 'client';
      if (open >= max) return 'all';
      open += 1;
      byClient.set(client, mine + 1);
      let isCounted = true;
      return () => {
        if (!isCounted) return;
        isCounted = false;
        open -= 1;
        const left = (byClient.get(client) ?? 1) - 1;
        if (left === 0) byClient.delete(client);
        else byClient.set(client, left);
      };
    },
  };
}
