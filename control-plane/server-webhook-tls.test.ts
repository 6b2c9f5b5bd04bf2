/**
 * The control plane serves its admission webhooks over HTTPS with the certificate the webhook
 * keeper loads (here: supplied files, as cert-manager writes them), and counts each review.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { connectH2, postH2 } from '../test/support/control-plane/tls-request.js';
import { issueServingCertificate } from '../webhooks/certificates.js';
import { loadControlPlaneConfig } from './config.js';
import { type RunningControlPlane, startControlPlane } from './server.js';

let db: VcudaDb;
let cp: RunningControlPlane;
let caPem: string;

function sendTls(method: string, url: string, body = ''): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        ca: caPem,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
  const now = new Date();
  const issued = await issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 30, now);
  caPem = issued.caPem;
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-tls-'));
  writeFileSync(join(dir, 'tls.crt'), issued.certPem);
  writeFileSync(join(dir, 'tls.key'), issued.keyPem);
  writeFileSync(join(dir, 'ca.crt'), issued.caPem);
  const config = loadControlPlaneConfig({
    flags: {
      logLevel: 'silent',
      host: '127.0.0.1',
      port: 0,
      // Served (non-zero); the port itself is any free one, bound by the server (override below).
      httpsPort: 8443,
      kube: { mode: 'none' },
      signingKeys: { source: 'ephemeral' },
      extender: { port: 0 },
      webhook: {
        certificates: {
          mode: 'files',
          certFile: join(dir, 'tls.crt'),
          keyFile: join(dir, 'tls.key'),
          caFile: join(dir, 'ca.crt'),
        },
      },
    },
  });
  cp = await startControlPlane(config, { db, httpsPort: 0 });
});

afterAll(async () => {
  await cp?.close();
  await closeDb(db);
});

it('answers a real 1.26 AdmissionReview over HTTPS, trusted through the supplied CA', async () => {
  expect(cp.httpsUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  const review = readFileSync(
    new URL('../webhooks/testdata/kubernetes-1.26/admission-mutate-create-share.json', import.meta.url),
    'utf8',
  );
  const res = await sendTls('POST', `${cp.httpsUrl}/admission/mutate?timeout=10s`, review);
  expect(res.status).toBe(200);
  const answer = JSON.parse(res.text) as { response: { uid: string; allowed: boolean } };
  expect(answer.response).toMatchObject({ uid: '438597a4-63b4-4da0-9522-ce423b151589', allowed: true });
  const metrics = await (await fetch(`${cp.url}/metrics`)).text();
  expect(metrics).toMatch(/vcuda_admission_reviews_total\{[^}]*hook="mutate"[^}]*\} 1/);
});

it('answers reviews over HTTP/2, as kube-apiserver sends them to a listener that offers it, on one session', async () => {
  const review = readFileSync(
    new URL('../webhooks/testdata/kubernetes-1.26/admission-mutate-create-share.json', import.meta.url),
    'utf8',
  );
  const session = await connectH2(cp.httpsUrl as string, { caPem });
  try {
    expect(session.alpnProtocol).toBe('h2');
    const answers = await Promise.all([1, 2, 3].map(() => postH2(session, '/admission/mutate?timeout=10s', review)));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect((a.json() as { response: { allowed: boolean } }).response.allowed).toBe(true);
    }
    expect((await postH2(session, '/scheduler/bind', {})).status).toBe(401);
  } finally {
    session.destroy();
  }
});

it('answers reviews with the admission listener in front of the app, and everything else with the app', async () => {
  // The listener refuses a GET on a hook path with 405; the app alone would not know the route.
  expect((await sendTls('GET', `${cp.httpsUrl}/admission/mutate`)).status).toBe(405);
  expect((await sendTls('GET', `${cp.httpsUrl}/healthz`)).text).toBe('ok');
});

it('refuses the extender verbs on the webhook port: TLS without a client certificate is no scheduler', async () => {
  const bind = { PodName: 'p', PodNamespace: 'default', PodUID: 'uid-p', Node: 'n1' };
  const res = await sendTls('POST', `${cp.httpsUrl}/scheduler/bind`, JSON.stringify(bind));
  expect(res.status).toBe(401);
  const metrics = await (await fetch(`${cp.url}/metrics`)).text();
  expect(metrics).not.toMatch(/vcuda_extender_binds_total\{[^}]*\} [1-9]/);
});
