/**
 * The simulated scheduler's extender transport behaves as kube-scheduler's Go transport: it offers
 * h2 and HTTP/1.1; over h2 every call is a stream of one session (reopened when it goes), over
 * HTTP/1.1 connections are kept alive, 2 idle at most, more while calls overlap.
 */
import http2, { type Http2Session } from 'node:http2';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type IssuedCertificate,
  issueCertificateAuthority,
  issueLeafCertificate,
} from '../../webhooks/certificates.js';
import { type ServiceProxy, startServiceProxy } from '../service-proxy.js';
import { type ExtenderCall, ExtenderTransport, type TlsMaterial } from './extender-transport.js';

const now = new Date();
const later = new Date(now.getTime() + 86_400_000);

type Answer = { version: string; port: number; cn: string };

/** A TLS test server demanding a client certificate; answers who called and over what, or never on `/hang`. */
type TestServer = {
  port: number;
  handshakes: number;
  /** The ALPN protocols each client offered (HTTP/1.1 server only). */
  offered: string[][];
  open: Set<Socket>;
  sessions: Set<Http2Session>;
  close(): Promise<void>;
};

let ca: IssuedCertificate;
let serving: IssuedCertificate;
let clientA: TlsMaterial;
let clientB: TlsMaterial;
const servers: TestServer[] = [];
const transports: ExtenderTransport[] = [];

beforeAll(async () => {
  ca = await issueCertificateAuthority('transport test CA', now, later);
  serving = await issueLeafCertificate(ca, { dnsNames: [], ipAddresses: ['127.0.0.1'], usage: 'server' }, now, later);
  const client = async (cn: string): Promise<TlsMaterial> => {
    const c = await issueLeafCertificate(
      ca,
      { commonName: cn, dnsNames: [cn], ipAddresses: [], usage: 'client' },
      now,
      later,
    );
    return {
      rejectUnauthorized: true,
      ca: Buffer.from(ca.certPem),
      cert: Buffer.from(c.certPem),
      key: Buffer.from(c.keyPem),
    };
  };
  [clientA, clientB] = await Promise.all([client('vcuda-scheduler'), client('vcuda-scheduler-renewed')]);
});

afterEach(() => {
  for (const t of transports.splice(0)) t.close();
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

function handler(delayMs: number) {
  return (
    req: http2.Http2ServerRequest | import('node:http').IncomingMessage,
    res: import('node:http').ServerResponse | http2.Http2ServerResponse,
  ) => {
    req.resume();
    if (req.url?.endsWith('/hang')) return;
    const socket = req.socket as TLSSocket;
    const answer: Answer = {
      version: req.httpVersion,
      port: socket.remotePort ?? 0,
      cn: String(socket.getPeerCertificate().subject?.CN),
    };
    setTimeout(() => res.end(JSON.stringify(answer)), delayMs);
  };
}

async function startServer(kind: 'h1' | 'h2', delayMs = 0): Promise<TestServer> {
  const tls = {
    cert: serving.certPem,
    key: serving.keyPem,
    ca: ca.certPem,
    requestCert: true,
    rejectUnauthorized: true,
  };
  const offered: string[][] = [];
  const server =
    kind === 'h2'
      ? http2.createSecureServer({ ...tls, allowHTTP1: true }, handler(delayMs))
      : https.createServer(
          {
            ...tls,
            ALPNCallback: ({ protocols }) => {
              offered.push(protocols);
              return 'http/1.1';
            },
          },
          handler(delayMs),
        );
  const s: TestServer = {
    port: 0,
    handshakes: 0,
    offered,
    open: new Set(),
    sessions: new Set(),
    close: () =>
      new Promise<void>((r) => {
        for (const x of s.sessions) x.destroy();
        for (const x of s.open) x.destroy();
        server.close(() => r());
      }),
  };
  server.on('secureConnection', (socket: Socket) => {
    s.handshakes += 1;
    s.open.add(socket);
    socket.on('close', () => s.open.delete(socket));
  });
  server.on('session', (session: Http2Session) => {
    s.sessions.add(session);
    session.on('close', () => s.sessions.delete(session));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  s.port = (server.address() as { port: number }).port;
  servers.push(s);
  return s;
}

function transport(keepAlive = true): ExtenderTransport {
  const t = new ExtenderTransport({ keepAlive });
  transports.push(t);
  return t;
}

async function call(t: ExtenderTransport, port: number, opts: Partial<ExtenderCall> = {}): Promise<Answer> {
  const answer = await t.post({
    url: new URL(`https://127.0.0.1:${port}/scheduler/bind`),
    tls: clientA,
    payload: Buffer.from('{"PodName":"p"}'),
    timeoutMs: 5000,
    verb: 'bind',
    ...opts,
  });
  expect(answer.status).toBe(200);
  return JSON.parse(answer.text) as Answer;
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe('against an HTTP/1.1-only server', () => {
  it('offers h2 and HTTP/1.1, then keeps its one connection alive across calls', async () => {
    const server = await startServer('h1');
    const t = transport();
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await call(t, server.port));
    expect(server.offered[0]).toEqual(['h2', 'http/1.1']);
    expect(server.handshakes).toBe(1);
    expect(answers.map((a) => a.version)).toEqual(['1.1', '1.1', '1.1']);
  });

  it('opens a connection per overlapping call and keeps 2 of them idle', async () => {
    const server = await startServer('h1', 50);
    const t = transport();
    await Promise.all(Array.from({ length: 6 }, () => call(t, server.port)));
    expect(server.handshakes).toBe(6);
    await until(() => server.open.size === 2, '2 idle connections');
    await call(t, server.port);
    expect(server.handshakes).toBe(6);
  });
});

describe('against a server that speaks h2', () => {
  it('sends overlapping calls as streams of one session', async () => {
    const server = await startServer('h2', 20);
    const t = transport();
    const answers = await Promise.all(Array.from({ length: 40 }, () => call(t, server.port)));
    expect(server.handshakes).toBe(1);
    expect(new Set(answers.map((a) => a.version))).toEqual(new Set(['2.0']));
    expect(new Set(answers.map((a) => a.port)).size).toBe(1);
  });

  it('opens a new session after the server closes one (GOAWAY) or drops its connection', async () => {
    const server = await startServer('h2');
    const t = transport();
    await call(t, server.port);
    for (const s of server.sessions) s.close();
    expect((await call(t, server.port)).version).toBe('2.0');
    expect(server.handshakes).toBe(2);
    for (const s of server.open) s.destroy();
    await until(() => server.sessions.size === 0, 'the dropped session');
    await new Promise((r) => setTimeout(r, 20));
    expect((await call(t, server.port)).version).toBe('2.0');
    expect(server.handshakes).toBe(3);
  });

  it('fails a call past its timeout alone: the session carries the others on', async () => {
    const server = await startServer('h2');
    const t = transport();
    await call(t, server.port);
    await expect(
      call(t, server.port, { url: new URL(`https://127.0.0.1:${server.port}/scheduler/hang`), timeoutMs: 200 }),
    ).rejects.toThrow('extender bind: no answer within 200 ms');
    await call(t, server.port);
    expect(server.handshakes).toBe(1);
  });

  it('without keep-alive, opens a session per call and closes it after', async () => {
    const server = await startServer('h2');
    const t = transport(false);
    for (let i = 0; i < 3; i++) expect((await call(t, server.port)).version).toBe('2.0');
    expect(server.handshakes).toBe(3);
    await until(() => server.sessions.size === 0, 'the sessions to close');
  });

  it('keeps one session per TLS material: a renewed client certificate gets its own', async () => {
    const server = await startServer('h2');
    const t = transport();
    expect((await call(t, server.port)).cn).toBe('vcuda-scheduler');
    expect((await call(t, server.port, { tls: clientB })).cn).toBe('vcuda-scheduler-renewed');
    expect((await call(t, server.port)).cn).toBe('vcuda-scheduler');
    expect(server.handshakes).toBe(2);
  });

  it('checks the server as over HTTP/1.1: a name the certificate does not cover fails', async () => {
    const server = await startServer('h2');
    await expect(
      call(transport(), server.port, { tls: { ...clientA, servername: 'elsewhere.example' } }),
    ).rejects.toThrow(/elsewhere\.example/);
    expect(server.handshakes).toBe(0);
  });
});

describe('behind a Service whose backend changes', () => {
  let proxy: ServiceProxy;
  afterAll(async () => proxy?.close());

  it('uses h2 from the first new connection to a backend that offers it', async () => {
    const old = await startServer('h1');
    const upgraded = await startServer('h2');
    proxy = await startServiceProxy();
    proxy.setBackends([old.port]);
    const t = transport();
    expect((await call(t, proxy.port)).version).toBe('1.1');
    proxy.setBackends([upgraded.port]);
    for (const s of old.open) s.destroy();
    await new Promise((r) => setTimeout(r, 50));
    // This call's new connection negotiates h2: it becomes the session, the call goes over HTTP/1.1.
    expect((await call(t, proxy.port)).version).toBe('1.1');
    const after = await Promise.all([1, 2, 3].map(() => call(t, proxy.port)));
    expect(after.map((a) => a.version)).toEqual(['2.0', '2.0', '2.0']);
    expect(upgraded.handshakes).toBe(2);
  });
});
