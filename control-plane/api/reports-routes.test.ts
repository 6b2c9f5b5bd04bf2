import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { createReportRunner } from '../../db/reports.js';
import { createApp, type ErrorLog } from '../app.js';
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
      reports: ['gpu-hours', 'quota-usage', 'idle', 'fragmentation', 'top-consumers', 'burst'],
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
    // Values PostgreSQL cannot hold or compute with: a 400 naming the field, never a 500.
    ['/api/v1/reports/gpu-hours?since=275760-09-13', 400, 'invalid', /since: must be within the years 1970 to 9999/],
    ['/api/v1/reports/gpu-hours?until=+200000-01-01', 400, 'invalid', /until: must be within the years 1970/],
    ['/api/v1/reports/gpu-hours?since=1800-01-01', 400, 'invalid', /since: must be within/],
    ['/api/v1/reports/idle?idleForMinutes=99999999999', 400, 'invalid', /idleForMinutes: .*5270400/],
    ['/api/v1/reports/idle?idleBelowPct=1e-320', 400, 'invalid', /idleBelowPct: must be 0 or at least 0.000001/],
    ['/api/v1/reports/idle?idleBelowPct=NaN', 400, 'invalid', /idleBelowPct/],
    ['/api/v1/reports/idle?idleBelowPct=101', 400, 'invalid', /idleBelowPct/],
  ])('%s -> %i', async (url, status, code, message) => {
    const res = await app.request(url);
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe(code);
    expect(body.error.message).toMatch(message);
  });
});

describe('an unexpected failure', () => {
  it('answers a generic 500 and logs the error with its cause', async () => {
    const logged: Parameters<ErrorLog['error']>[] = [];
    const cause = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    const app = createApp({
      api: reportsRoutes({
        reports: {
          names: ['idle'],
          run: async () => {
            throw new Error('report query failed', { cause });
          },
        },
      }),
      log: { error: (...args) => logged.push(args) },
    });
    const res = await app.request('/api/v1/reports/idle');
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
    expect(logged).toHaveLength(1);
    const [fields, message] = logged[0] as Parameters<ErrorLog['error']>;
    expect(message).toBe('request failed');
    expect(fields).toMatchObject({ method: 'GET', path: '/api/v1/reports/idle' });
    expect((fields.err as Error).message).toBe('report query failed');
    expect((fields.err as Error).cause).toBe(cause);
  });

  it('logs nothing for a refusal the caller caused', async () => {
    const logged: unknown[] = [];
    const app = createApp({
      api: reportsRoutes({ reports: { names: [], run: async () => ({}) as never } }),
      log: { error: (...args) => logged.push(args) },
    });
    expect((await app.request('/api/v1/reports/idle?format=xml')).status).toBe(400);
    expect(logged).toEqual([]);
  });
});

describe('the idle threshold shared with the dashboard', () => {
  it("runs the idle report with the dashboard's idleForMinutes unless the query names one", async () => {
    const asked: unknown[] = [];
    const app = createApp({
      api: reportsRoutes({
        reports: {
          names: ['idle', 'gpu-hours'],
          run: async (name, params) => {
            asked.push({ name, ...params });
            return { name, rows: [] } as never;
          },
        },
        idleDefaults: { idleForMinutes: 2 },
      }),
      log: { error: () => {} },
    });
    await app.request('/api/v1/reports/idle');
    await app.request('/api/v1/reports/idle?idleForMinutes=45');
    await app.request('/api/v1/reports/gpu-hours');
    expect(asked).toEqual([
      { name: 'idle', idleForMinutes: '2' },
      { name: 'idle', idleForMinutes: '45' },
      { name: 'gpu-hours' },
    ]);
  });
});
