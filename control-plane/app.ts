/**
 * The control plane's HTTP surface: one hono app composed of sub-apps, each built by the
 * component that owns it. One error exit maps vcuda's error classes to HTTP statuses.
 */
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { VcudaError, type VcudaErrorCode } from '../contract/index.js';
import { limitRequestBody } from '../webhooks/request-body-limit.js';

/** Where an unexpected failure is told (pino's `error`: `{ err }` keeps the stack and cause). */
export type ErrorLog = { error: (fields: { err: unknown; method: string; path: string }, message: string) => void };

/** `/api/v1` bodies: a usage batch of 10,000 samples with long names stays well below this. */
export const DEFAULT_API_MAX_BODY_BYTES = 16 * 1024 * 1024;

export type AppParts = {
  /** `/admission/mutate`, `/admission/validate` (webhooks/). */
  admission?: Hono;
  /** `/scheduler/filter`, `/scheduler/prioritize`, `/scheduler/bind`. */
  scheduler?: Hono;
  /** `/api/v1/...`: reports, ledger, cluster state. */
  api?: Hono;
  /** `/` and its assets. */
  dashboard?: Hono;
  /** Prometheus text exposition. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
  /** Readiness: the ledger reachable, the watch cache synced; a reason when not. */
  readiness?: () => Promise<Readiness>;
  /** Every answer 500 is logged here with its cause; the caller sees only "internal error". */
  log?: ErrorLog;
  /** Largest request body `/api/v1` reads (413 past it); default DEFAULT_API_MAX_BODY_BYTES. */
  apiMaxBodyBytes?: number;
};

export type Readiness = { ready: true } | { ready: false; reason: string };

/**
 * Refuses a request body larger than `maxBytes` with 413, before it is read into memory:
 * by its Content-Length, or while streaming a chunked body.
 */
export function limitBody(maxBytes: number): MiddlewareHandler {
  return limitRequestBody(maxBytes, (c: Context) =>
    c.json({ error: { code: 'too-large', message: `request body exceeds ${maxBytes} bytes` } }, 413),
  );
}

/** One `/api/v1` sub-app from the routes several components contribute. */
export function apiRoutes(...parts: Hono[]): Hono {
  const api = new Hono();
  for (const part of parts) api.route('/', part);
  return api;
}

/** Every general code's HTTP status; a code added to VcudaErrorCode does not compile until it has one. */
const STATUS_OF_CODE: { readonly [C in VcudaErrorCode]: ErrorStatus } = {
  invalid: 400,
  'too-large': 413,
  unauthenticated: 401,
  forbidden: 403,
  'not-found': 404,
  conflict: 409,
  'capacity-conflict': 409,
  'quota-exceeded': 409,
  unavailable: 503,
  internal: 500,
};

/** Seconds a 503's caller is told to wait: a ledger or API server restart takes about this long. */
const RETRY_AFTER_S = 5;

type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 500 | 503;

const isGeneralCode = (code: string): code is VcudaErrorCode => Object.hasOwn(STATUS_OF_CODE, code);

export function statusOf(err: unknown): ErrorStatus {
  if (err instanceof VcudaError && isGeneralCode(err.code)) return STATUS_OF_CODE[err.code];
  return 500;
}

export function createApp(parts: AppParts): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.text('ok'));
  app.get('/readyz', async (c) => {
    const r = (await parts.readiness?.()) ?? { ready: true };
    return r.ready ? c.text('ok') : c.text(`not ready: ${r.reason}`, 503);
  });
  if (parts.metrics) {
    const metrics = parts.metrics;
    app.get('/metrics', async (c) => {
      const { contentType, body } = await metrics();
      return c.body(body, 200, { 'content-type': contentType });
    });
  }
  if (parts.admission) app.route('/admission', parts.admission);
  if (parts.scheduler) app.route('/scheduler', parts.scheduler);
  if (parts.api) {
    app.use('/api/v1/*', limitBody(parts.apiMaxBodyBytes ?? DEFAULT_API_MAX_BODY_BYTES));
    app.route('/api/v1', parts.api);
  }
  if (parts.dashboard) app.route('/', parts.dashboard);
  app.onError((err, c) => {
    if (err instanceof HTTPException) return err.getResponse();
    const status = statusOf(err);
    const code = err instanceof VcudaError ? err.code : 'internal';
    if (status === 500) parts.log?.error({ err, method: c.req.method, path: c.req.path }, 'request failed');
    // Unavailable is temporary by definition: say when to come back (RFC 9110, 10.2.3).
    if (status === 503) c.header('Retry-After', String(RETRY_AFTER_S));
    return c.json({ error: { code, message: status === 500 ? 'internal error' : err.message } }, status);
  });
  return app;
}
