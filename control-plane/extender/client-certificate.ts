/**
 * Only kube-scheduler may call the extender: its verbs bind pods, reserve ledger capacity and
 * write Events. The extender's listener asks every client for a certificate and has TLS verify it
 * against the trusted CAs, for client use; this gate admits a request only over a connection whose
 * certificate passed (none, an untrusted one, one for server use, or any other listener, plain or
 * TLS: 401, with TLS's reason) and that names an allowed client (a certificate the same CA issued
 * to another party: 403). Nothing of the body is read before both hold; bodies past the limit then
 * get 413 as they stream in.
 */
import type { Http2ServerRequest } from 'node:http2';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import type { HttpBindings } from '@hono/node-server';
import { Hono, type MiddlewareHandler } from 'hono';
import { limitRequestBody } from '../../webhooks/request-body-limit.js';

/** The names a certificate answers to: its subject CN and its DNS subject alternative names. */
export function certificateNames(cert: Pick<PeerCertificate, 'subject' | 'subjectaltname'>): string[] {
  const cn = cert.subject?.CN;
  const cns = Array.isArray(cn) ? cn : cn ? [cn] : [];
  const dns = (cert.subjectaltname ?? '')
    .split(', ')
    .filter((s) => s.startsWith('DNS:'))
    .map((s) => s.slice(4));
  return [...new Set([...cns, ...dns])];
}

/** A request as the node servers hand it over (`c.env.incoming` under hono), HTTP/1.1 or HTTP/2. */
export type IncomingRequest = HttpBindings['incoming'] | Http2ServerRequest;

/**
 * The request's TLS socket and the connection it came over. Over HTTP/2, `incoming.socket` is a
 * proxy made per stream (reading through to the session's TLS socket), so the connection is the
 * h2 session, one per TLS connection; over HTTP/1.1 it is the socket itself.
 */
function tlsConnectionOf(incoming: IncomingRequest | undefined): { socket: TLSSocket; connection: object } | undefined {
  const socket = incoming?.socket as Partial<TLSSocket> | undefined;
  if (!socket || typeof socket.getPeerCertificate !== 'function') return undefined;
  const session = (incoming as Partial<Http2ServerRequest>).stream?.session;
  return { socket: socket as TLSSocket, connection: session ?? socket };
}

/** A request's client certificate, judged: verified by TLS and naming an allowed client, or why not. */
export type ClientVerdict =
  | { ok: true; names: string[] }
  | { ok: false; status: 401; reason: string; tls: boolean }
  | { ok: false; status: 403; reason: string; names: string[] };

/**
 * Judges requests by the client certificate their TLS connection presented: 401 without one that
 * TLS verified against the listener's CAs (for client use), 403 when it names none of `allowed`.
 * Clients keep connections alive (over h2, one for every call): a connection's names are read once.
 */
export function clientCertificateCheck(
  allowed: readonly string[],
): (incoming: IncomingRequest | undefined) => ClientVerdict {
  const names = new Set(allowed);
  const presentedOn = new WeakMap<object, string[]>();
  return (incoming) => {
    const tls = tlsConnectionOf(incoming);
    if (!tls?.socket.authorized) {
      const socket = tls?.socket;
      return { ok: false, status: 401, reason: socket ? String(socket.authorizationError) : 'not TLS', tls: !!socket };
    }
    let presented = presentedOn.get(tls.connection);
    if (!presented) {
      presented = certificateNames(tls.socket.getPeerCertificate());
      presentedOn.set(tls.connection, presented);
    }
    if (!presented.some((n) => names.has(n)))
      return { ok: false, status: 403, reason: 'name not allowed', names: presented };
    return { ok: true, names: presented };
  };
}

/** Told of each refusal: `status` 401 (no verified certificate) or 403 (a trusted one naming someone else). */
export type RefusalObserver = (refusal: { status: 401 | 403; path: string; reason: string; names?: string[] }) => void;

/** 401 without a verified client certificate, 403 when it names none of `allowed`. */
export function requireClientCertificate(allowed: readonly string[], onRefused?: RefusalObserver): MiddlewareHandler {
  const check = clientCertificateCheck(allowed);
  return async (c, next) => {
    const verdict = check((c.env as { incoming?: IncomingRequest } | undefined)?.incoming);
    if (verdict.ok) return next();
    if (verdict.status === 401) {
      const why =
        verdict.tls && verdict.reason !== 'null' && verdict.reason !== 'undefined' ? ` (${verdict.reason})` : '';
      onRefused?.({ status: 401, path: c.req.path, reason: verdict.reason });
      return c.json(
        { Error: `the scheduler extender answers only on its TLS port, to a client certificate it trusts${why}` },
        401,
      );
    }
    onRefused?.({ status: 403, path: c.req.path, reason: verdict.reason, names: verdict.names });
    return c.json(
      { Error: `client certificate ${JSON.stringify(verdict.names)} is not one of the allowed extender clients` },
      403,
    );
  };
}

/** The extender's verbs behind the client-certificate gate and the body limit. */
export function guardedExtender(
  routes: Hono,
  opts: { allowedClients: readonly string[]; maxBodyBytes: number; onRefused?: RefusalObserver },
): Hono {
  const app = new Hono();
  app.use('*', requireClientCertificate(opts.allowedClients, opts.onRefused));
  // kube-scheduler sends Content-Length: judged by it, the verbs read their bodies directly.
  app.use(
    '*',
    limitRequestBody(opts.maxBodyBytes, (c) =>
      c.json({ Error: `request body exceeds ${opts.maxBodyBytes} bytes` }, 413),
    ),
  );
  app.route('/', routes);
  return app;
}

/**
 * The extender's paths on a listener that is not the extender's: 401 before reading a byte. A
 * listener that verifies other client certificates (the webhook port's API server callers) must
 * not let one of them pass the extender's gate by naming an allowed client.
 */
export function extenderNotServedHere(): Hono {
  const app = new Hono();
  app.all('*', (c) =>
    c.json({ Error: 'the scheduler extender answers only on its TLS port, to a client certificate it trusts' }, 401),
  );
  return app;
}
