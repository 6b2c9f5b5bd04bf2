import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { applyPatch } from 'fast-json-patch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { createApp } from '../control-plane/app.js';
import { createAdmissionListener, readHookPath } from './admission-handler.js';
import { type AdmissionRoutesDeps, admissionRoutes } from './admission-routes.js';

const fixtures = new URL('./testdata/kubernetes-1.26/', import.meta.url);
const share = readFileSync(new URL('admission-mutate-create-share.json', fixtures), 'utf8');
const MAX_BODY = 64 * 1024;

const deps: AdmissionRoutesDeps = {
  names: resourceNames(),
  memoryUnitMiB: 1,
  clusterName: 'lab',
  schedulerName: 'vcuda-scheduler',
  privilegedUsernames: [],
  maxBodyBytes: MAX_BODY,
  logger: { info: () => {}, warn: () => {} },
};
const listener = createAdmissionListener(deps);
const honoApp = createApp({ admission: admissionRoutes(deps) });

let server: http.Server;
let port = 0;
beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (!listener(req, res)) {
      res.writeHead(404);
      res.end('not admission');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

type Sent = { status: number; body: string; headers: http.IncomingHttpHeaders };

function call(path: string, body?: string, opts: { method?: string; chunked?: boolean } = {}): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json' };
    if (body !== undefined && !opts.chunked) headers['content-length'] = Buffer.byteLength(body);
    const req = http.request({ host: '127.0.0.1', port, path, method: opts.method ?? 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers }),
      );
    });
    req.on('error', reject);
    if (body !== undefined && opts.chunked) {
      // Several writes without Content-Length: node sends them chunked.
      for (let i = 0; i < body.length; i += 1000) req.write(body.slice(i, i + 1000));
      req.end();
    } else req.end(body);
  });
}

describe('readHookPath', () => {
  it.each([
    ['/admission/mutate', 'mutate'],
    ['/admission/validate?timeout=5s', 'validate'],
    ['/admission/mutate?', 'mutate'],
    ['/admission/validate-claims?timeout=10s', 'validate-claims'],
    ['/admission/mutate-claims', 'mutate-claims'],
    ['/admission/claims', undefined],
    ['/admission/mutatex', undefined],
    ['/admission/', undefined],
    ['/api/v1/mutate', undefined],
    ['/admission/validate/x', undefined],
    [undefined, undefined],
  ])('%s -> %s', (url, hook) => {
    expect(readHookPath(url, '/admission/')).toBe(hook);
  });
});

describe('createAdmissionListener', () => {
  it('patches the real 1.26 share-30 pod exactly as the hono routes do', async () => {
    const direct = await call('/admission/mutate?timeout=10s', share);
    const viaHono = await honoApp.request('/admission/mutate?timeout=10s', {
      method: 'POST',
      body: share,
      headers: { 'content-type': 'application/json' },
    });
    expect(direct.status).toBe(200);
    expect(direct.headers['content-type']).toBe('application/json');
    expect(Number(direct.headers['content-length'])).toBe(Buffer.byteLength(direct.body));
    expect(direct.body).toBe(await viaHono.text());
    const review = JSON.parse(direct.body);
    const original = JSON.parse(share);
    expect(review.response.uid).toBe(original.request.uid);
    expect(review.response.allowed).toBe(true);
    const patch = JSON.parse(Buffer.from(review.response.patch, 'base64').toString());
    const patched = applyPatch(structuredClone(original.request.object), patch).newDocument;
    expect(patched.metadata.labels['vcuda.io/gpu']).toBe('true');
    expect(patched.spec.schedulerName).toBe('vcuda-scheduler');
  });

  it('reads a chunked body (no Content-Length) the same way', async () => {
    const chunked = await call('/admission/mutate', share, { chunked: true });
    const sized = await call('/admission/mutate', share);
    expect(chunked.status).toBe(200);
    expect(chunked.body).toBe(sized.body);
  });

  it('validates on /admission/validate', async () => {
    const review = JSON.parse(share);
    review.request.object.metadata.annotations = { 'vcuda.io/assignment': 'forged' };
    const sent = await call('/admission/validate', JSON.stringify(review));
    const answer = JSON.parse(sent.body);
    expect(answer.response.allowed).toBe(false);
    expect(answer.response.status.code).toBe(403);
    expect(answer.response.status.message).toContain('metadata.annotations["vcuda.io/assignment"]');
  });

  it('leaves other paths to the next listener', async () => {
    const sent = await call('/api/v1/nodes', '{}');
    expect(sent).toMatchObject({ status: 404, body: 'not admission' });
  });

  it('answers 405 to a GET', async () => {
    const sent = await call('/admission/mutate', undefined, { method: 'GET' });
    expect(sent.status).toBe(405);
    expect(sent.headers.allow).toBe('POST');
  });

  it.each([
    ['empty', '', 'empty'],
    ['not JSON', 'hello', 'not JSON'],
    [
      'no uid',
      JSON.stringify({ ...JSON.parse(share), request: { ...JSON.parse(share).request, uid: '' } }),
      'request.uid: must be a non-empty string',
    ],
  ])('answers 400 naming the problem: %s', async (_name, body, fragment) => {
    const sent = await call('/admission/mutate', body);
    expect(sent.status).toBe(400);
    const answer = JSON.parse(sent.body);
    expect(answer.error.code).toBe('invalid');
    expect(answer.error.message).toContain(fragment);
  });

  it('refuses a body over the limit from its Content-Length, and a chunked one as it passes the limit', async () => {
    const big = JSON.stringify({ pad: 'x'.repeat(MAX_BODY) });
    for (const chunked of [false, true]) {
      const sent = await call('/admission/mutate', big, { chunked });
      expect(sent.status).toBe(400);
      expect(JSON.parse(sent.body).error.message).toContain(`exceeds ${MAX_BODY} bytes`);
    }
  });

  it('answers 500 and logs, never hangs, when a dependency throws past the answerer', async () => {
    const warned: string[] = [];
    const broken = createAdmissionListener({
      ...deps,
      logger: { info: () => {}, warn: (_obj, msg) => warned.push(msg) },
      observer: {
        observe: () => {
          throw new Error('metrics registry gone');
        },
      },
    });
    const other = http.createServer((req, res) => broken(req, res));
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    const saved = port;
    port = (other.address() as AddressInfo).port;
    try {
      const sent = await call('/admission/mutate', share);
      expect(sent.status).toBe(500);
      expect(JSON.parse(sent.body).error.code).toBe('internal');
      expect(warned).toEqual(['admission answer failed']);
    } finally {
      port = saved;
      await new Promise<void>((r) => other.close(() => r()));
    }
  });

  it('gives the same answer on the same connection, review after review', async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => call('/admission/mutate', share)));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
  });
});

describe('the claim hooks on the listener', () => {
  // A real 1.36 review of a claim with four problems (testdata/kubernetes-1.36/README.md).
  const badClaim = readFileSync(new URL('../kubernetes-1.36/claim-validate-create-bad-share.json', fixtures), 'utf8');

  it('answers a claim review exactly as the hono routes do', async () => {
    const viaListener = await call('/admission/validate-claims?timeout=10s', badClaim);
    const viaHono = await honoApp.request('/admission/validate-claims?timeout=10s', { method: 'POST', body: badClaim });
    expect(viaListener.status).toBe(200);
    expect(JSON.parse(viaListener.body).response.allowed).toBe(false);
    expect(viaListener.body).toBe(await viaHono.text());
  });

  it('refuses a claim review over the limit before reading it', async () => {
    const padded = badClaim.replace('"status":{}', `"status":{},"pad":"${'x'.repeat(MAX_BODY)}"`);
    const r = await call('/admission/mutate-claims', padded);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error.message).toBe(`request body exceeds ${MAX_BODY} bytes`);
  });
});
