import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { fieldError, ValidationError, VcudaError } from '../contract/index.js';
import { createApp, statusOf } from './app.js';

describe('statusOf', () => {
  it.each([
    [new ValidationError([fieldError('a', 'rule', 'bad')]), 400],
    [new VcudaError('invalid', 'x'), 400],
    [new VcudaError('too-large', 'x'), 413],
    [new VcudaError('unauthenticated', 'x'), 401],
    [new VcudaError('forbidden', 'x'), 403],
    [new VcudaError('not-found', 'x'), 404],
    [new VcudaError('conflict', 'x'), 409],
    [new VcudaError('capacity-conflict', 'x'), 409],
    [new VcudaError('quota-exceeded', 'x'), 409],
    [new VcudaError('unavailable', 'x'), 503],
    [new VcudaError('internal', 'x'), 500],
    [new Error('a bug'), 500],
  ])('%s → %i', (err, status) => {
    expect(statusOf(err)).toBe(status);
  });

  it('answers an unexpected error with a generic 500 and logs it with its cause', async () => {
    const logged: { err: unknown }[] = [];
    const api = new Hono().get('/boom', () => {
      throw new Error('secret detail', { cause: new Error('root') });
    });
    const app = createApp({ api, log: { error: (fields) => logged.push(fields as { err: unknown }) } });
    const res = await app.request('/api/v1/boom');
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
    expect(logged.map((l) => (l.err as Error).cause)).toEqual([new Error('root')]);
  });

  it('answers a conflict with 409 and its message', async () => {
    const api = new Hono().get('/c', () => {
      throw new VcudaError('conflict', 'pod was changed by another replica');
    });
    const res = await createApp({ api }).request('/api/v1/c');
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({ error: { code: 'conflict', message: 'pod was changed by another replica' } });
  });
});
