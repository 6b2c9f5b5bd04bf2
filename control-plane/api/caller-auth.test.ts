import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { VcudaError } from '../../contract/index.js';
import { createApp } from '../app.js';
import { type Caller, cachedAuthenticator, ReviewPacing, requireCaller } from './caller-auth.js';

const AGENT: Caller = { username: 'system:serviceaccount:vcuda-system:vcuda-node-agent', groups: [] };

describe('cachedAuthenticator', () => {
  it('asks once per token within the TTL, and again after it; refusals expire sooner', async () => {
    let now = 0;
    const asked: string[] = [];
    const auth = cachedAuthenticator(
      async (token) => {
        asked.push(token);
        return token === 'good' ? AGENT : undefined;
      },
      { acceptTtlMs: 60_000, refuseTtlMs: 10_000, now: () => now },
    );
    expect(await auth('good')).toEqual(AGENT);
    expect(await auth('bad')).toBeUndefined();
    now = 9_000;
    await auth('good');
    await auth('bad');
    expect(asked).toEqual(['good', 'bad']);
    now = 11_000;
    await auth('good');
    await auth('bad');
    expect(asked).toEqual(['good', 'bad', 'bad']);
    now = 61_000;
    await auth('good');
    expect(asked).toEqual(['good', 'bad', 'bad', 'good']);
  });

  it('reviews at most the pace allows for tokens nobody knows, and a flood of them evicts no known one', async () => {
    let now = 0;
    const asked: string[] = [];
    const auth = cachedAuthenticator(
      async (t) => {
        asked.push(t);
        return t === 'agent' ? AGENT : undefined;
      },
      { maxEntries: 100, now: () => now, pacing: new ReviewPacing({ perClientBurst: 5, perClientPerSecond: 1 }) },
    );
    expect(await auth('agent', '10.0.0.1')).toEqual(AGENT);
    // 1,000 made-up tokens from one pod: five reviews, then 503s without asking the API server.
    let refusedUnasked = 0;
    for (let i = 0; i < 1000; i++) {
      await auth(`made-up-${i}`, '10.9.9.9').catch((err: VcudaError) => {
        expect(err.code).toBe('unavailable');
        refusedUnasked++;
      });
    }
    expect(asked).toHaveLength(6);
    expect(refusedUnasked).toBe(995);
    // A refused token asked again is answered from the negative cache, pace or no pace.
    expect(await auth('made-up-0', '10.9.9.9')).toBeUndefined();
    // The node agent's accepted token is still known, from its own address or any other.
    expect(await auth('agent', '10.0.0.1')).toEqual(AGENT);
    expect(asked).toHaveLength(6);
    // The pace refills: one more review a second.
    now = 1_000;
    expect(await auth('made-up-1000', '10.9.9.9')).toBeUndefined();
    expect(asked).toHaveLength(7);
  });

  it('paces all clients together too', () => {
    const pacing = new ReviewPacing({ totalBurst: 3, totalPerSecond: 1 });
    expect([1, 2, 3, 4].map((i) => pacing.tryTake(`10.0.0.${i}`, 0))).toEqual([true, true, true, false]);
    expect(pacing.tryTake('10.0.0.5', 1000)).toBe(true);
  });

  it('keeps at most maxEntries answers', async () => {
    const asked: string[] = [];
    const auth = cachedAuthenticator(
      async (t) => {
        asked.push(t);
        return AGENT;
      },
      { maxEntries: 2 },
    );
    for (const t of ['a', 'b', 'c', 'a']) await auth(t);
    // 'a' was evicted when 'c' came in, so it is reviewed again.
    expect(asked).toEqual(['a', 'b', 'c', 'a']);
  });
});

describe('requireCaller', () => {
  const appWith = (review: (token: string) => Promise<Caller | undefined>) => {
    const api = new Hono();
    api.use('/usage', requireCaller(review, [AGENT.username], 'POST /api/v1/usage'));
    api.post('/usage', (c) => c.json({ ok: true }));
    return createApp({ api });
  };
  const post = (app: Hono, authorization?: string) =>
    app.request('/api/v1/usage', { method: 'POST', headers: authorization ? { authorization } : {} });

  it('answers 401 without a token or with a refused one, 403 for a caller not allowed, and lets the agent in', async () => {
    const app = appWith(async (t) =>
      t === 'agent' ? AGENT : t === 'tenant' ? { username: 'alice', groups: [] } : undefined,
    );
    const none = await post(app);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { message: string } }).error.message).toMatch(
      /needs a service account token/,
    );
    expect((await post(app, 'Bearer forged')).status).toBe(401);
    expect((await post(app, 'Basic YWxpY2U6cHc=')).status).toBe(401);
    const tenant = await post(app, 'Bearer tenant');
    expect(tenant.status).toBe(403);
    expect(((await tenant.json()) as { error: { message: string } }).error.message).toMatch(/alice may not do this/);
    expect((await post(app, 'Bearer agent')).status).toBe(200);
  });

  it('fails closed with 503 when the API server cannot review the token', async () => {
    const app = appWith(async () => {
      throw new VcudaError('unavailable', 'token review: connect ECONNREFUSED');
    });
    expect((await post(app, 'Bearer agent')).status).toBe(503);
  });
});
