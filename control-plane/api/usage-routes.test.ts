import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, rowsOf, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { createUsageStore } from '../../db/usage.js';
import { createApp } from '../app.js';
import { usageRoutes } from './usage-routes.js';

let db: VcudaDb;
let app: ReturnType<typeof createApp>;

const sample = (over: Record<string, unknown> = {}) => ({
  podUid: 'uid-1',
  namespace: 'team-a',
  pod: 'infer',
  container: 'model',
  cardUuid: 'GPU-1',
  memoryUsedBytes: 3 * 1024 * 1024 + 5,
  memoryLimitBytes: 8 * 1024 * 1024,
  coreRequest: 30,
  coreLimit: 60,
  smShare: 0.25,
  ...over,
});

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
  const usage = createUsageStore(db, { clock: () => new Date('2026-11-22T04:00:00Z') });
  app = createApp({ api: usageRoutes({ clusterName: 'prod-eu', usage }) });
});

afterAll(async () => {
  await closeDb(db);
});

const post = (body: unknown) =>
  app.request('/api/v1/usage', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe('POST /api/v1/usage', () => {
  it('records measured samples in the ledger under the control plane cluster and skips unmeasured ones', async () => {
    const res = await post({
      node: 'gpu-node-a',
      at: '2026-11-22T03:59:50.000Z',
      periodS: 10,
      samples: [sample(), sample({ container: 'sidecar', smShare: null })],
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ recorded: 1, skipped: 1 });
    const rows = rowsOf<{
      cluster: string;
      container: string;
      sm_pct: number;
      memory_used_mib: number;
      period_s: number;
    }>(await db.execute(sql`select cluster, container, sm_pct, memory_used_mib, period_s from usage_samples`));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ cluster: 'prod-eu', container: 'model', memory_used_mib: 3 });
    expect(Number(rows[0]?.sm_pct)).toBe(25);
    expect(Number(rows[0]?.period_s)).toBe(10);
  });

  it.each([
    ['not JSON', '{', '(body)'],
    ['no node', { at: '2026-11-22T00:00:00Z', samples: [] }, 'node'],
    ['bad time', { node: 'n', at: 'yesterday', samples: [] }, 'at'],
    [
      'share above 1',
      { node: 'n', at: '2026-11-22T00:00:00Z', samples: [sample({ smShare: 1.5 })] },
      'samples[0].smShare',
    ],
    [
      'negative memory',
      { node: 'n', at: '2026-11-22T00:00:00Z', samples: [sample({ memoryUsedBytes: -1 })] },
      'samples[0].memoryUsedBytes',
    ],
    ['period too long', { node: 'n', at: '2026-11-22T00:00:00Z', periodS: 7200, samples: [] }, 'periodS'],
  ])('refuses %s with a 400 naming the field', async (_name, body, field) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('invalid');
    expect(error.message).toContain(field);
  });
});
