/**
 * The HTTPS listeners speak HTTP/2 to clients that offer it (kube-scheduler, kube-apiserver), with
 * every call multiplexed over one connection, and HTTP/1.1 to the others; the extender's
 * client-certificate gate, the body limit, the raw-request front, re-keying and close hold on both.
 */
import { X509Certificate } from 'node:crypto';
import type { ClientHttp2Session } from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { HttpBindings } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectH2,
  postH2,
  postTls,
  type TlsAnswer,
  type TlsClient,
} from '../../test/support/control-plane/tls-request.js';
import {
  type IssuedCertificate,
  issueCertificateAuthority,
  issueLeafCertificate,
} from '../../webhooks/certificates.js';
import { guardedExtender } from '../extender/client-certificate.js';
import { type ListenerTls, type Listening, listen, type RequestFront } from './http-listener.js';

const now = new Date();
const later = new Date(now.getTime() + 86_400_000);
const LIMIT = 4096;

type Party = { ca: IssuedCertificate; serving: IssuedCertificate; client: TlsClient; stranger: TlsClient };
let first: Party;
let second: Party;
let listening: Listening;
const sessions: ClientHttp2Session[] = [];

async function party(name: string): Promise<Party> {
  const ca = await issueCertificateAuthority(name, now, later);
  const leaf = (commonName: string, usage: 'client' | 'server') =>
    issueLeafCertificate(
      ca,
      {
        commonName,
        dnsNames: commonName ? [commonName] : [],
        ipAddresses: usage === 'server' ? ['127.0.0.1'] : [],
        usage,
      },
      now,
      later,
    );
  const serving = await leaf('', 'server');
  const asClient = (c: IssuedCertificate): TlsClient => ({ certPem: c.certPem, keyPem: c.keyPem, caPem: ca.certPem });
  return {
    ca,
    serving,
    client: asClient(await leaf('vcuda-scheduler', 'client')),
    stranger: asClient(await leaf('vcuda-node-agent', 'client')),
  };
}

const tlsOf = (p: Party): ListenerTls => ({ key: p.serving.keyPem, cert: p.serving.certPem, ca: p.ca.certPem });

/** The extender's gate over a route that says which protocol and connection carried the call. */
function app(): Hono {
  const routes = new Hono();
  routes.post('/echo', async (c) => {
    const body = await c.req.text();
    const { incoming } = c.env as HttpBindings;
    return c.json({ version: incoming.httpVersion, port: incoming.socket.remotePort, bytes: body.length });
  });
  return new Hono().route(
    '/scheduler',
    guardedExtender(routes, { allowedClients: ['vcuda-scheduler'], maxBodyBytes: LIMIT }),
  );
}

const front: RequestFront = (req, res) => {
  if (req.url !== '/front') return false;
  req.resume();
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end(`front ${req.httpVersion}`);
  return true;
};

async function h2(url: string, client: TlsClient): Promise<ClientHttp2Session> {
  const session = await connectH2(url, client);
  sessions.push(session);
  return session;
}

beforeAll(async () => {
  [first, second] = await Promise.all([party('first CA'), party('second CA')]);
  listening = await listen(app(), '127.0.0.1', 0, tlsOf(first), front);
});

afterAll(async () => {
  for (const s of sessions) s.destroy();
  await listening?.close();
});

describe('HTTPS listener: HTTP/2 with HTTP/1.1 fallback', () => {
  it('answers many concurrent calls of an h2 client over its one session', async () => {
    const session = await h2(listening.url, first.client);
    expect(session.alpnProtocol).toBe('h2');
    const answers = await Promise.all(Array.from({ length: 40 }, () => postH2(session, '/scheduler/echo', { a: 1 })));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    const seen = answers.map((a) => a.json() as { version: string; port: number });
    expect(new Set(seen.map((s) => s.version))).toEqual(new Set(['2.0']));
    expect(new Set(seen.map((s) => s.port))).toEqual(new Set([session.socket.localPort]));
  });

  it('still answers HTTP/1.1 clients, through the gate and the front', async () => {
    const answer = await postTls(`${listening.url}/scheduler/echo`, { a: 1 }, first.client);
    expect(answer.status).toBe(200);
    expect(answer.json()).toMatchObject({ version: '1.1', bytes: 7 });
    expect((await postTls(`${listening.url}/front`, '', first.client)).text).toBe('front 1.1');
  });

  it('lets the front answer an h2 request on the raw request and response', async () => {
    const session = await h2(listening.url, first.client);
    expect((await postH2(session, '/front', '')).text).toBe('front 2.0');
  });

  it('refuses an h2 client without a trusted certificate with 401, saying why, and one naming another party with 403', async () => {
    const anonymous = await h2(listening.url, { caPem: first.ca.certPem });
    const unknown = await h2(listening.url, { ...second.client, caPem: first.ca.certPem });
    const stranger = await h2(listening.url, first.stranger);
    const good = await h2(listening.url, first.client);
    // Interleaved on one listener: each connection's verdict is its own.
    const [a, u, s, g] = await Promise.all(
      [anonymous, unknown, stranger, good].map((session) =>
        Promise.all([1, 2, 3].map(() => postH2(session, '/scheduler/echo', {}))),
      ),
    );
    expect(a?.map((r) => r.status)).toEqual([401, 401, 401]);
    expect(a?.[0]?.text).toMatch(/PEER_DID_NOT_RETURN_A_CERTIFICATE|UNABLE_TO_GET_ISSUER_CERT/);
    expect(u?.map((r) => r.status)).toEqual([401, 401, 401]);
    expect(u?.[0]?.text).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT/);
    expect(s?.map((r) => r.status)).toEqual([403, 403, 403]);
    expect(s?.[0]?.text).toContain('vcuda-node-agent');
    expect(g?.map((r) => r.status)).toEqual([200, 200, 200]);
  });

  it('refuses an h2 body past the limit with 413, declared or streamed', async () => {
    const session = await h2(listening.url, first.client);
    expect((await postH2(session, '/scheduler/echo', 'x'.repeat(LIMIT + 1))).status).toBe(413);
    const streamed = await streamH2(session, '/scheduler/echo', 10 * 1024 * 1024);
    expect(streamed.status).toBe(413);
    expect(streamed.sentBytes).toBeLessThan(10 * 1024 * 1024);
    // The session outlives the refused streams.
    expect((await postH2(session, '/scheduler/echo', {})).status).toBe(200);
  });
});

describe('HTTPS listener lifecycle over HTTP/2', () => {
  it('applies setCertificate to new h2 sessions: new serving certificate and trusted client CA', async () => {
    const own = await listen(app(), '127.0.0.1', 0, tlsOf(first));
    try {
      const before = await h2(own.url, first.client);
      own.setCertificate(tlsOf(second));
      const after = await h2(own.url, second.client);
      expect(after.alpnProtocol).toBe('h2');
      const served = (after.socket as TLSSocket).getPeerX509Certificate();
      expect(served?.fingerprint256).toBe(new X509Certificate(second.serving.certPem).fingerprint256);
      expect((await postH2(after, '/scheduler/echo', {})).status).toBe(200);
      // A client of the CA no longer trusted is refused on a new session...
      const old = await h2(own.url, { ...first.client, caPem: second.ca.certPem });
      expect((await postH2(old, '/scheduler/echo', {})).status).toBe(401);
      // ...while the session opened before keeps the verdict of its own handshake.
      expect((await postH2(before, '/scheduler/echo', {})).status).toBe(200);
    } finally {
      await own.close();
    }
  });

  it('closes with h2 sessions and HTTP/1.1 connections still open', async () => {
    const own = await listen(app(), '127.0.0.1', 0, tlsOf(first));
    const session = await h2(own.url, first.client);
    expect((await postH2(session, '/scheduler/echo', {})).status).toBe(200);
    const ended = new Promise<void>((r) => session.once('close', () => r()));
    session.on('error', () => undefined);
    const start = performance.now();
    await own.close();
    await ended;
    expect(performance.now() - start).toBeLessThan(2000);
  }, 10_000);
});

type Streamed = TlsAnswer & { sentBytes: number };

/** Streams `total` bytes with no Content-Length, stopping when the answer comes. */
function streamH2(session: ClientHttp2Session, path: string, total: number): Promise<Streamed> {
  const chunk = Buffer.alloc(16 * 1024, 0x20);
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
    let sent = 0;
    let status = 0;
    let text = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (text += d));
    stream.on('end', () => resolve({ status, text, json: () => JSON.parse(text), sentBytes: sent }));
    stream.on('error', (err) =>
      status ? resolve({ status, text, json: () => undefined, sentBytes: sent }) : reject(err),
    );
    const pump = () => {
      while (!status && sent < total && !stream.destroyed) {
        sent += chunk.length;
        if (!stream.write(chunk)) return void stream.once('drain', pump);
      }
      if (!status && !stream.destroyed) stream.end();
    };
    pump();
  });
}
