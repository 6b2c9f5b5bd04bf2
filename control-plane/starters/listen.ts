/** The control plane's HTTP and HTTPS listeners: a hono app on a port, closable and re-keyable. */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';

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

export type RequestFront = (req: IncomingMessage, res: ServerResponse) => boolean;

/** Serves `app`; with `tls`, HTTPS, where `front` may answer a request first (returns true). */
export function listen(
  app: Hono,
  host: string,
  port: number,
  tls?: ListenerTls,
  front?: RequestFront,
): Promise<Listening> {
  return new Promise((resolve, reject) => {
    const server = serve(
      tls
        ? {
            fetch: app.fetch,
            port,
            hostname: host,
            createServer: ((options: ServerOptions, handler: RequestListener) =>
              createHttpsServer(options, (req, res) => {
                if (!front?.(req, res)) handler(req, res);
              })) as unknown as typeof createHttpsServer,
            serverOptions: tls.ca ? { ...tls, requestCert: true, rejectUnauthorized: false } : tls,
          }
        : { fetch: app.fetch, port, hostname: host },
      (info: AddressInfo) => {
        const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
        resolve({
          url: `${tls ? 'https' : 'http'}://${shown}:${info.port}`,
          setCertificate: (next) =>
            (server as unknown as { setSecureContext?: (o: ListenerTls) => void }).setSecureContext?.(next),
          close: () =>
            new Promise<void>((done) => {
              (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
              server.close(() => done());
            }),
        });
      },
    );
    server.once('error', reject);
  });
}
