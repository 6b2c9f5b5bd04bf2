/** One HTTPS request with an optional client certificate, as kube-scheduler's extender client sends it. Test-only. */
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
