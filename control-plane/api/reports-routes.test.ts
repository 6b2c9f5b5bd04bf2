import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { createReportRunner } from '../../db/reports.js';
import { createApp } from '../app.js';
import { reportsRoutes } from './reports-routes.js';

const NOW = new Date('2026-03-02T12:00:00Z');

describe('GET /api/v1/reports/:name', () => {
  let db: VcudaDb;
  let app: ReturnType<typeof createApp>;

  beforeAll(async () => {
    db = await connectDb({});
    await migrate(db);
    let now = new Date('2026-03-02T00:00:00Z');
    const ledger = createLedger(db, { clock: () => now });
    await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 }]);
    await ledger.upsertNode('c2', 'n1', [{ uuid: 'GPU-z', index: 0, model: 'A100', memoryMiB: 40_000 }]);
    const item = { container: 'main', core: 50, memoryMiB: 1_000 };
    await ledger.reserve({
      cluster: 'c1',
      podUid: 'p1',
      namespace: 'ml',
      pod: 'p1',
      node: 'n1',
      items: [{ ...item, cardUuid: 'GPU-a' }],
    });
    await ledger.reserve({
      cluster: 'c2',
      podUid: 'q1',
      namespace: 'web,x',
      pod: 'q1',
      node: 'n1',
      items: [{ ...item, cardUuid: 'GPU-z' }],
    });
    now = NOW;
    app = createApp({ api: reportsRoutes({ reports: createReportRunner(db, { clock: () => NOW }) }) });
  });
  afterAll(async () => {
    await closeDb(db);
  });

  it('lists the reports', async () => {
    const res = await app.request('/api/v1/reports');
    expect(await res.json()).toEqual({
      reports: ['gpu-hours', 'quota-usage', 'idle', 'fragmentation', 'top-consumers'],
    });
  });

  it('answers JSON by default, with the window it used', async () => {
    const res = await app.request('/api/v1/reports/top-consumers?since=2026-03-02&until=2026-03-03');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { since: string; until: string; rows: unknown[] };
    expect(body.since).toBe('2026-03-02T00:00:00.000Z');
    // 12 h x 0.5 each, up to now.
    expect(body.rows).toEqual([
      { cluster: 'c1', namespace: 'ml', team: '', allocatedGpuHours: 6, usedGpuHours: 0, efficiencyPct: 0 },
      { cluster: 'c2', namespace: 'web,x', team: '', allocatedGpuHours: 6, usedGpuHours: 0, efficiencyPct: 0 },
    ]);
  });

  it('answers CSV and filters by cluster', async () => {
    const res = await app.request('/api/v1/reports/gpu-hours?format=csv&since=2026-03-02&until=2026-03-03&cluster=c2');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toContain('gpu-hours.csv');
    expect(await res.text()).toBe(
      'day,cluster,namespace,team,allocatedGpuHours,usedGpuHours\r\n2026-03-02,c2,"web,x",,6,0\r\n',
    );
  });

  it.each([
    ['/api/v1/reports/nope', 404, 'not-found', /report nope does not exist/],
    ['/api/v1/reports/idle?format=xml', 400, 'invalid', /format/],
    ['/api/v1/reports/gpu-hours?since=soon', 400, 'invalid', /since/],
    ['/api/v1/reports/gpu-hours?groupBy=pod', 400, 'invalid', /groupBy/],
    ['/api/v1/reports/idle?idleForMinutes=-3', 400, 'invalid', /idleForMinutes/],
  ])('%s -> %i', async (url, status, code, message) => {
    const res = await app.request(url);
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe(code);
    expect(body.error.message).toMatch(message);
  });
});
