/**
 * The gate reads a connection's client certificate once: over HTTP/1.1 the connection is the
 * request's socket; over HTTP/2 each stream gets its own socket proxy, so the connection is the
 * stream's session, and one session's verdict never answers for another.
 */
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { requireClientCertificate } from './client-certificate.js';

/** A verified TLS socket whose certificate names `cn`; counts how often the gate reads it. */
function tlsSocket(cn: string) {
  const socket = {
    reads: 0,
    authorized: true,
    authorizationError: null,
    getPeerCertificate: () => {
      socket.reads += 1;
      return { subject: { CN: cn }, subjectaltname: `DNS:${cn}` };
    },
  };
  return socket;
}

function gated(): Hono {
  const app = new Hono();
  app.use('*', requireClientCertificate(['vcuda-scheduler']));
  app.post('/bind', (c) => c.text('bound'));
  return app;
}

/** As node's h2 compatibility API shows a stream: a fresh socket proxy, the session shared. */
function h2Incoming(session: object, socket: ReturnType<typeof tlsSocket>) {
  return { socket: new Proxy(socket, {}), stream: { session } };
}

async function statuses(app: Hono, incoming: () => unknown, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++)
    out.push((await app.request('/bind', { method: 'POST' }, { incoming: incoming(), outgoing: {} })).status);
  return out;
}

describe('the client-certificate gate, per connection', () => {
  it('reads an HTTP/1.1 connection’s certificate once for all its requests', async () => {
    const app = gated();
    const socket = tlsSocket('vcuda-scheduler');
    expect(await statuses(app, () => ({ socket }), 3)).toEqual([200, 200, 200]);
    expect(socket.reads).toBe(1);
  });

  it('reads an h2 session’s certificate once across its streams, and keeps each session’s verdict its own', async () => {
    const app = gated();
    const scheduler = { socket: tlsSocket('vcuda-scheduler'), session: {} };
    const agent = { socket: tlsSocket('vcuda-node-agent'), session: {} };
    const mixed: number[] = [];
    for (let i = 0; i < 3; i++) {
      mixed.push(...(await statuses(app, () => h2Incoming(scheduler.session, scheduler.socket), 1)));
      mixed.push(...(await statuses(app, () => h2Incoming(agent.session, agent.socket), 1)));
    }
    expect(mixed).toEqual([200, 403, 200, 403, 200, 403]);
    expect([scheduler.socket.reads, agent.socket.reads]).toEqual([1, 1]);
  });
});
