/**
 * Every listener drops a client that sends its headers slowly, or nothing at all, within 10 s (plain
 * HTTP, HTTPS over HTTP/1.1, a TLS handshake never begun), keeps a client that is answered, and
 * caps its open connections.
 */
import { connect as netConnect, type Socket } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { connect as tlsConnect } from 'node:tls';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LISTENER_LIMITS } from '../../contract/index.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { type Listening, listen } from './http-listener.js';

const DROPPED_WITHIN_MS = 10_000;
let plain: Listening;
let https: Listening;

beforeAll(async () => {
  const app = new Hono().get('/', (c) => c.text('ok'));
  const issued = await issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 1, new Date());
  plain = await listen(app, '127.0.0.1', 0);
  https = await listen(app, '127.0.0.1', 0, { key: issued.keyPem, cert: issued.certPem });
});
afterAll(async () => {
  await plain?.close();
  await https?.close();
});

const portOf = (l: Listening) => Number(new URL(l.url).port);

/**
 * How long until the server closes `socket` (Infinity: not within a minute), less the longest
 * stall of this process's event loop meanwhile: the server's deadline is a timer in this process,
 * and on a host loaded enough to keep it off a core for seconds it fires late by that much (CI
 * on 2 cores once saw both it and a give-up timer due in the same turn).
 */
function closedAfter(socket: Socket, t0: number): Promise<number> {
  const stalls = monitorEventLoopDelay({ resolution: 20 });
  stalls.enable();
  return new Promise((resolve) => {
    const giveUp = setTimeout(() => {
      stalls.disable();
      socket.destroy();
      resolve(Number.POSITIVE_INFINITY);
    }, 60_000);
    socket.on('error', () => undefined);
    socket.once('close', () => {
      clearTimeout(giveUp);
      stalls.disable();
      resolve(Date.now() - t0 - stalls.max / 1e6);
    });
  });
}

/** Starts a request and sends one more header line every 500 ms, never finishing them. */
function trickle(socket: Socket): void {
  socket.write('GET / HTTP/1.1\r\nHost: x\r\n');
  const tick = setInterval(() => socket.writable && socket.write('X-Slow: 1\r\n'), 500);
  socket.once('close', () => clearInterval(tick));
}

describe('every listener bounds its clients', () => {
  it('drops a plain-HTTP client trickling its headers within 10 s', async () => {
    const t0 = Date.now();
    const socket = netConnect(portOf(plain), '127.0.0.1', () => trickle(socket));
    expect(await closedAfter(socket, t0)).toBeLessThan(DROPPED_WITHIN_MS);
  });

  it('drops a plain-HTTP client that connects and sends nothing within 10 s', async () => {
    const socket = netConnect(portOf(plain), '127.0.0.1');
    expect(await closedAfter(socket, Date.now())).toBeLessThan(DROPPED_WITHIN_MS);
  });

  it('drops an HTTPS client trickling HTTP/1.1 headers, and one that never starts TLS, within 10 s', async () => {
    const t0 = Date.now();
    const slow = tlsConnect(
      { port: portOf(https), host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] },
      () => trickle(slow),
    );
    const silent = netConnect(portOf(https), '127.0.0.1');
    const [slowMs, silentMs] = await Promise.all([closedAfter(slow, t0), closedAfter(silent, t0)]);
    expect(slowMs).toBeLessThan(DROPPED_WITHIN_MS);
    expect(silentMs).toBeLessThan(DROPPED_WITHIN_MS);
  });

  it('answers a prompt client, and keeps its connection while it is answered', async () => {
    const res = await fetch(`${plain.url}/`);
    expect(await res.text()).toBe('ok');
  });

  it(`closes connections past ${LISTENER_LIMITS.maxConnections} at once`, async () => {
    const sockets: Socket[] = [];
    try {
      for (let i = 0; i < LISTENER_LIMITS.maxConnections; i++) {
        const s = netConnect(portOf(plain), '127.0.0.1');
        s.on('error', () => undefined);
        sockets.push(s);
        await new Promise((r) => s.once('connect', r));
      }
      // Let the server register the accepted ones before the next knocks.
      await new Promise((r) => setTimeout(r, 200));
      const extra = netConnect(portOf(plain), '127.0.0.1');
      expect(await closedAfter(extra, Date.now())).toBeLessThan(1_000);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});
