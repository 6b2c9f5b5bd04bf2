/**
 * The control plane's HTTP surface: one hono app composed of sub-apps, each built by the
 * component that owns it. One error exit maps vcuda's error classes to HTTP statuses.
 */
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { ValidationError, VcudaError } from '../contract/index.js';

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
};

export type Readiness = { ready: true } | { ready: false; reason: string };

/** One `/api/v1` sub-app from the routes several components contribute. */
export function apiRoutes(...parts: Hono[]): Hono {
  const api = new Hono();
  for (const part of parts) api.route('/', part);
  return api;
}

export function statusOf(err: unknown): 400 | 401 | 403 | 404 | 409 | 500 | 503 {
  if (err instanceof ValidationError) return 400;
  if (err instanceof VcudaError) {
    if (err.code === 'unauthenticated') return 401;
    if (err.code === 'forbidden') return 403;
    if (err.code === 'not-found') return 404;
    if (err.code === 'capacity-conflict' || err.code === 'quota-exceeded') return 409;
    if (err.code === 'unavailable') return 503;
    if (err.code === 'invalid') return 400;
  }
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
  if (parts.api) app.route('/api/v1', parts.api);
  if (parts.dashboard) app.route('/', parts.dashboard);
  app.onError((err, c) => {
    if (err instanceof HTTPException) return err.getResponse();
    const status = statusOf(err);
    const code = err instanceof VcudaError ? err.code : 'internal';
    return c.json({ error: { code, message: status === 500 ? 'internal error' : err.message } }, status);
  });
  return app;
}
