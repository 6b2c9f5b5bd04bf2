/**
 * kube-scheduler's extender transport: k8s `makeTransport` builds a Go `http.Transport` and
 * `utilnet.SetTransportDefaults` enables HTTP/2 on it (`http2.ConfigureTransports`). Every TLS
 * connection offers ALPN `h2, http/1.1`, and what the server picks decides the connection:
 *
 * - h2: every call is a stream of one multiplexed session per origin and TLS material. A session
 *   that closes, errors or is told to go away is forgotten and the next call opens another; a
 *   session idle for 90 s is closed (Go's `IdleConnTimeout`).
 * - HTTP/1.1: connections are kept alive and reused, at most 2 idle per host (Go's
 *   `DefaultMaxIdleConnsPerHost`), and calls that overlap (the binds in flight) open more.
 *
 * Each new connection negotiates anew, so a server that starts offering h2 is used over h2 from
 * its next connection. `keepAlive: false` is Go's `DisableKeepAlives`: a fresh connection per
 * call, a single-use session over h2. Plain-HTTP extenders get HTTP/1.1 over a keep-alive agent.
 * The TLS material is part of every pool's key, so a renewed client certificate is used on new
 * connections.
 */
import http from 'node:http';
import http2, { type ClientHttp2Session } from 'node:http2';
import https from 'node:https';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import tls, { type TLSSocket } from 'node:tls';
import { tlsMaterialKey } from '../../kube-connections/pooled-kube-config.js';

/** The TLS side of one call: trust, client certificate, the name the server must prove. */
export type TlsMaterial = {
  rejectUnauthorized: boolean;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  servername?: string;
};

export type ExtenderCall = {
  url: URL;
  /** For `https:` URLs. */
  tls?: TlsMaterial;
  payload: Buffer;
  timeoutMs: number;
  /** Names the call in errors. */
  verb: string;
};

export type ExtenderAnswer = { status: number; text: string };

const ALPN = ['h2', 'http/1.1'];
const HTTP1_ONLY = ['http/1.1'];
/** Go's `IdleConnTimeout` as `SetTransportDefaults` sets it. */
const IDLE_SESSION_MS = 90_000;
const noAnswer = (c: ExtenderCall) => new Error(`extender ${c.verb}: no answer within ${c.timeoutMs} ms`);

/**
 * Where a call goes: the origin's h2 session, or HTTP/1.1 through the agent, with the connection
 * just made (taken by the first of the calls that waited for it; the agent dials for the others).
 */
type Route = { h2: ClientHttp2Session } | { http1: { socket?: TLSSocket } };

export class ExtenderTransport {
  private readonly keepAlive: boolean;
  private readonly plain: http.Agent;
  private readonly secure: https.Agent;
  /** Live h2 sessions by origin and TLS material. */
  private readonly sessions = new Map<string, ClientHttp2Session>();
  /** First connections in progress, shared by the calls that wait for them. */
  private readonly dialing = new Map<string, Promise<Route>>();
  /** Origins whose last new connection negotiated HTTP/1.1: their calls go to the agent. */
  private readonly http1 = new Set<string>();
  /** After close(), a connection a call still makes serves that call alone. */
  private closed = false;

  constructor(opts: { keepAlive: boolean } = { keepAlive: true }) {
    this.keepAlive = opts.keepAlive;
    this.plain = new http.Agent({ keepAlive: opts.keepAlive, maxFreeSockets: 2 });
    this.secure = new NegotiatingAgent({ keepAlive: opts.keepAlive, maxFreeSockets: 2 }, (key, socket, url) => {
      const session = this.adopt(key, socket, url);
      // Not kept (closed transport): no call of this one uses it.
      if (this.sessions.get(key) !== session) session.close();
    });
  }

  /** One POST of `payload`; answers with the status and body, whatever the status. */
  async post(call: ExtenderCall): Promise<ExtenderAnswer> {
    if (call.url.protocol !== 'https:') return http1Post(call, this.plain);
    const key = poolKey(call.url, call.tls);
    for (let attempt = 0; ; attempt++) {
      const route = this.keepAlive ? await this.route(key, call) : await this.dial(key, call);
      if ('http1' in route) {
        const socket = route.http1.socket;
        route.http1.socket = undefined;
        return http1Post(call, this.secure, { key, url: call.url, ...(socket ? { socket } : {}) });
      }
      try {
        return await h2Post(route.h2, call);
      } catch (err) {
        // As Go's transport: a call the server never processed goes again on a new session.
        if (attempt > 0 || !(err instanceof Unprocessed)) throw err instanceof Unprocessed ? err.original : err;
        this.forget(key, route.h2);
      } finally {
        if (!this.keepAlive || this.closed) route.h2.close();
      }
    }
  }

  close(): void {
    this.closed = true;
    this.plain.destroy();
    this.secure.destroy();
    for (const session of this.sessions.values()) session.destroy();
    this.sessions.clear();
  }

  /** The origin's live session, the agent for an HTTP/1.1 origin, or a first connection. */
  private route(key: string, call: ExtenderCall): Promise<Route> {
    const session = this.sessions.get(key);
    if (session) return Promise.resolve({ h2: session });
    if (this.http1.has(key)) return Promise.resolve({ http1: {} });
    let pending = this.dialing.get(key);
    if (!pending) {
      pending = this.dial(key, call);
      this.dialing.set(key, pending);
      const done = () => this.dialing.delete(key);
      pending.then(done, done);
    }
    return pending;
  }

  /** A new connection offering h2 and HTTP/1.1: an h2 one becomes the origin's session. */
  private async dial(key: string, call: ExtenderCall): Promise<Route> {
    const socket = await dialTls(call.url, call.tls, ALPN, call.timeoutMs);
    if (socket.alpnProtocol === 'h2') return { h2: this.adopt(key, socket, call.url) };
    if (this.keepAlive) this.http1.add(key);
    return { http1: { socket } };
  }

  private adopt(key: string, socket: TLSSocket, url: URL): ClientHttp2Session {
    const session = http2.connect(url.origin, { createConnection: () => socket });
    const forget = () => this.forget(key, session);
    session.on('error', forget);
    session.on('close', forget);
    session.on('goaway', forget);
    if (!this.keepAlive || this.closed) return session;
    session.setTimeout(IDLE_SESSION_MS, () => session.close());
    this.sessions.get(key)?.close();
    this.sessions.set(key, session);
    this.http1.delete(key);
    return session;
  }

  private forget(key: string, session: ClientHttp2Session): void {
    if (this.sessions.get(key) === session) this.sessions.delete(key);
  }
}

/**
 * The HTTP/1.1 pool for TLS origins. Its new connections offer h2 too, as Go's do: when the
 * server picks h2, that connection becomes the origin's session (for the calls after this one),
 * and this call gets a connection that offers HTTP/1.1 alone.
 */
class NegotiatingAgent extends https.Agent {
  constructor(
    opts: https.AgentOptions,
    private readonly onH2: (key: string, socket: TLSSocket, url: URL) => void,
  ) {
    super(opts);
  }

  override createConnection(
    options: https.RequestOptions & Http1Extra,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    const done = callback ?? (() => undefined);
    const { extender } = options;
    if (extender?.socket) return extender.socket;
    const base = (alpn: string[]) =>
      super.createConnection({ ...options, ALPNProtocols: alpn } as https.RequestOptions) as TLSSocket;
    settle(base(ALPN), options.timeout, (err, socket) => {
      if (err || !socket || socket.alpnProtocol !== 'h2' || !extender) return done(err, socket as Duplex);
      this.onH2(extender.key, socket, extender.url);
      settle(base(HTTP1_ONLY), options.timeout, (e, s) => done(e, s as Duplex));
    });
    return undefined;
  }
}

/** What a call tells the agent: its pool key, and the connection already made for it, if any. */
type Http1Extra = { extender?: { key: string; url: URL; socket?: TLSSocket } };

/** Calls back once the TLS handshake is done, or with its error or a timeout. */
function settle(
  socket: TLSSocket,
  timeoutMs: number | undefined,
  cb: (err: Error | null, socket?: TLSSocket) => void,
): void {
  const fail = (err: Error) => {
    socket.off('secureConnect', ok);
    cb(err);
  };
  const ok = () => {
    socket.off('error', fail);
    socket.setTimeout(0);
    cb(null, socket);
  };
  socket.once('secureConnect', ok);
  socket.once('error', fail);
  if (timeoutMs)
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no TLS handshake within ${timeoutMs} ms`)));
}

function dialTls(url: URL, material: TlsMaterial | undefined, alpn: string[], timeoutMs: number): Promise<TLSSocket> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const servername = material?.servername ?? (isIP(host) ? undefined : host);
  const socket = tls.connect({
    host,
    port: Number(url.port || 443),
    ...material,
    ...(servername ? { servername } : {}),
    ALPNProtocols: alpn,
  });
  // Go sets TCP_NODELAY on every connection; node's http client does, its tls and http2 do not.
  socket.setNoDelay(true);
  return new Promise((resolve, reject) => settle(socket, timeoutMs, (err, s) => (err ? reject(err) : resolve(s!))));
}

/** Origin, server name, trust and client certificate: connections are shared only within one key. */
function poolKey(url: URL, material: TlsMaterial | undefined): string {
  return `${url.origin}|${tlsMaterialKey(material ?? {})}`;
}

/** A stream the server refused before processing it: safe to send again. */
class Unprocessed extends Error {
  constructor(readonly original: Error) {
    super(original.message);
  }
}

function h2Post(session: ClientHttp2Session, call: ExtenderCall): Promise<ExtenderAnswer> {
  return new Promise((resolve, reject) => {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request({
        ':method': 'POST',
        ':path': `${call.url.pathname}${call.url.search}`,
        'content-type': 'application/json',
        'content-length': call.payload.length,
      });
    } catch (err) {
      // The session closed between choosing it and this call.
      return reject(new Unprocessed(err as Error));
    }
    let status = 0;
    const chunks: Buffer[] = [];
    stream.setTimeout(call.timeoutMs, () => stream.destroy(noAnswer(call)));
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve({ status, text: Buffer.concat(chunks).toString('utf8') }));
    stream.on('error', (err) =>
      reject(stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM ? new Unprocessed(err) : err),
    );
    stream.on('close', () => {
      if (!stream.readableEnded) reject(new Error(`extender ${call.verb}: stream closed unanswered`));
    });
    stream.end(call.payload);
  });
}

function http1Post(call: ExtenderCall, agent: http.Agent, extender?: Http1Extra['extender']): Promise<ExtenderAnswer> {
  const lib = call.url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const options = {
      method: 'POST',
      agent,
      timeout: call.timeoutMs,
      headers: { 'content-type': 'application/json', 'content-length': call.payload.length },
      ...(call.url.protocol === 'https:' ? call.tls : {}),
      ...(extender ? { extender } : {}),
    };
    const req = lib.request(call.url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    const dialed = extender?.socket;
    // The agent had a free connection after all: the one dialed for this call is not needed.
    if (dialed) req.once('socket', (s) => s !== dialed && dialed.destroy());
    req.on('timeout', () => req.destroy(noAnswer(call)));
    req.on('error', reject);
    req.end(call.payload);
  });
}
