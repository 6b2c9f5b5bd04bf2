/** HTTPS requests (HTTP/1.1 or HTTP/2) with an optional client certificate, as kube-scheduler's extender client sends them. Test-only. */
import { type ClientHttp2Session, connect } from 'node:http2';
import { type RequestOptions, request } from 'node:https';

export type TlsClient = { certPem?: string; keyPem?: string; caPem: string; servername?: string };

export type TlsAnswer = { status: number; text: string; json(): unknown };

/** A POST with the client's certificate and trust, on a fresh connection. */
export function tlsPostOptions(client: TlsClient, headers: Record<string, string | number>): RequestOptions {
  return {
    method: 'POST',
    agent: false,
    ca: client.caPem,
    ...(client.certPem ? { cert: client.certPem, key: client.keyPem } : {}),
    ...(client.servername ? { servername: client.servername } : {}),
    headers: { 'content-type': 'application/json', ...headers },
  };
}

export function postTls(url: string, body: unknown, client: TlsClient): Promise<TlsAnswer> {
  const payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(url, tlsPostOptions(client, { 'content-length': payload.length }), (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, json: () => JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** An HTTP/2 session over TLS with the client's certificate and trust, as Go's transport opens one when the server offers h2. */
export function connectH2(url: string, client: TlsClient): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = connect(url, {
      ca: client.caPem,
      ...(client.certPem ? { cert: client.certPem, key: client.keyPem } : {}),
      ...(client.servername ? { servername: client.servername } : {}),
    });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

/** One POST as a stream of `session`; `headers` may declare a Content-Length other than the body's. */
export function postH2(
  session: ClientHttp2Session,
  path: string,
  body: unknown,
  headers: Record<string, string | number> = {},
): Promise<TlsAnswer> {
  const payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/json',
      'content-length': payload.length,
      ...headers,
    });
    let status = 0;
    let text = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.setEncoding('utf8');
    stream.on('data', (d: string) => (text += d));
    stream.on('end', () => resolve({ status, text, json: () => JSON.parse(text) }));
    stream.on('error', reject);
    stream.end(payload);
  });
}
