/**
 * The control plane's HTTP and HTTPS listeners: a hono app on a port, closable and re-keyable.
 *
 * HTTPS listeners speak HTTP/2, with HTTP/1.1 for clients that do not offer it by ALPN.
 * kube-scheduler's extender transport and kube-apiserver's webhook client both offer h2 and then
 * send every call over one multiplexed connection; against HTTP/1.1 alone, Go keeps at most 2 idle
 * connections per host, so overlapping binds would open (and close) a TLS connection, with a full
 * client-certificate handshake on both sides, per pod.
 */
import type { EventEmitter } from 'node:events';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import {
  createSecureServer,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type Http2Session,
  type SecureServerOptions,
} from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';
import { boundListener, httpServerOptions, LISTENER_LIMITS } from '../../contract/index.js';

/**
 * An HTTPS listener's certificate; with `ca`, it also asks every client for a certificate and
 * verifies it against those CAs. The handshake completes either way, so a refused caller gets a
 * 401 that says why (`requireClientCertificate` reads the verdict) instead of a bare TLS alert.
 */
export type ListenerTls = { key: string; cert: string; ca?: string };

export type Listening = {
  url: string;
  close: () => Promise<void>;
  /** Swaps the TLS certificate (and trusted client CAs) of an HTTPS listener without a restart. */
  setCertificate: (tls: ListenerTls) => void;
};

/** A request on an HTTPS listener: HTTP/1.1 (`IncomingMessage`) or HTTP/2 (the compatibility API). */
export type TlsRequest = IncomingMessage | Http2ServerRequest;
export type TlsResponse = ServerResponse | Http2ServerResponse;

/** Answers a request on the raw node request and response before the app (returns true), or leaves it. */
export type RequestFront = (req: TlsRequest, res: TlsResponse) => boolean;

type Closable = { close(cb?: () => void): unknown };

/** Serves `app`; with `tls`, HTTPS (HTTP/2 and HTTP/1.1), where `front` may answer a request first (returns true). */
export function listen(
  app: Hono,
  host: string,
  port: number,
  tls?: ListenerTls,
  front?: RequestFront,
): Promise<Listening> {
  return new Promise((resolve, reject) => {
    // Every TLS connection, h2 or HTTP/1.1, and every h2 session: close() ends them, as
    // closeAllConnections would (http2 servers have none).
    const open = { sockets: new Set<Socket>(), sessions: new Set<Http2Session>() };
    const server = serve(
      tls
        ? {
            fetch: app.fetch,
            port,
            hostname: host,
            createServer: ((options: SecureServerOptions, handler: RequestListener) =>
              createSecureServer(options, (req, res) => {
                if (!front?.(req, res)) (handler as unknown as RequestFront)(req, res);
              })) as unknown as typeof createSecureServer,
            serverOptions: secureServerOptions(tls),
          }
        : { fetch: app.fetch, port, hostname: host, serverOptions: httpServerOptions() },
      (info: AddressInfo) => {
        const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
        resolve({
          url: `${tls ? 'https' : 'http'}://${shown}:${info.port}`,
          setCertificate: (next) =>
            (server as unknown as { setSecureContext?: (o: ListenerTls) => void }).setSecureContext?.(next),
          close: () =>
            new Promise<void>((done) => {
              (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
              for (const session of open.sessions) session.destroy();
              for (const socket of open.sockets) socket.destroy();
              (server as Closable).close(() => done());
            }),
        });
      },
    );
    if (tls) track(server as unknown as EventEmitter, open);
    boundListener(server as unknown as Parameters<typeof boundListener>[0], tls ? 'tls' : 'plain');
    server.once('error', reject);
  });
}

/**
 * HTTP/2 with HTTP/1.1 fallback; with `ca`, a client certificate asked for but judged by the app.
 * No Nagle delay (node's http servers turn it off, its http2 server does not): an h2 answer goes
 * out as HEADERS and DATA writes, and the second would wait for the client's delayed ACK (40 ms).
 */
function secureServerOptions(tls: ListenerTls): SecureServerOptions {
  return {
    ...tls,
    allowHTTP1: true,
    noDelay: true,
    handshakeTimeout: LISTENER_LIMITS.handshakeTimeoutMs,
    ...(tls.ca ? { requestCert: true, rejectUnauthorized: false } : {}),
  };
}

function track(server: EventEmitter, open: { sockets: Set<Socket>; sessions: Set<Http2Session> }): void {
  server.on('secureConnection', (socket: Socket) => {
    open.sockets.add(socket);
    socket.once('close', () => open.sockets.delete(socket));
  });
  server.on('session', (session: Http2Session) => {
    open.sessions.add(session);
    session.once('close', () => open.sessions.delete(session));
  });
}
