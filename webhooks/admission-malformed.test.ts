import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { createApp } from '../control-plane/app.js';
import { createAdmissionListener } from './admission-handler.js';
import { type AdmissionRoutesDeps, admissionRoutes } from './admission-routes.js';

const valid = JSON.parse(
  readFileSync(new URL('./testdata/kubernetes-1.26/admission-mutate-create-share.json', import.meta.url), 'utf8'),
);
const MAX_BODY = 256 * 1024;

const deps: AdmissionRoutesDeps = {
  names: resourceNames(),
  memoryUnitMiB: 1,
  clusterName: 'lab',
  privilegedUsernames: [],
  maxBodyBytes: MAX_BODY,
  logger: { info: () => {}, warn: () => {} },
};
const app = createApp({ admission: admissionRoutes(deps) });

/** The real payload with one change made by `edit`. */
// biome-ignore lint/suspicious/noExplicitAny: the edits reach into arbitrary JSON on purpose.
function variant(edit: (review: Record<string, any>) => void): string {
  const copy = structuredClone(valid);
  edit(copy);
  return JSON.stringify(copy);
}

// Each row: a body the API server would never send, and a fragment the 400 message must contain.
const malformed: [string, string, string][] = [
  ['empty body', '', 'empty'],
  ['whitespace only', '  \n ', 'empty'],
  ['not JSON', 'hello', 'not JSON'],
  ['truncated JSON', JSON.stringify(valid).slice(0, 500), 'not JSON'],
  ['trailing garbage', `${JSON.stringify(valid)}}`, 'not JSON'],
  ['YAML instead of JSON', 'apiVersion: admission.k8s.io/v1\nkind: AdmissionReview', 'not JSON'],
  ['JSON null', 'null', '(root)'],
  ['JSON number', '42', '(root)'],
  ['JSON string', '"AdmissionReview"', '(root)'],
  ['JSON array', '[]', '(root)'],
  ['empty object', '{}', 'apiVersion'],
  [
    'v1beta1 apiVersion',
    variant((r) => (r.apiVersion = 'admission.k8s.io/v1beta1')),
    'apiVersion: must be "admission.k8s.io/v1"',
  ],
  ['apiVersion missing', variant((r) => delete r.apiVersion), 'apiVersion'],
  ['wrong kind', variant((r) => (r.kind = 'AdmissionResponse')), 'kind: must be "AdmissionReview"'],
  ['kind missing', variant((r) => delete r.kind), 'kind'],
  ['request missing', variant((r) => delete r.request), 'request'],
  ['request null', variant((r) => (r.request = null)), 'request'],
  ['request is a string', variant((r) => (r.request = 'x')), 'request'],
  ['uid missing', variant((r) => delete r.request.uid), 'request.uid'],
  ['uid empty', variant((r) => (r.request.uid = '')), 'request.uid: must be a non-empty string'],
  ['uid a number', variant((r) => (r.request.uid = 7)), 'request.uid'],
  ['operation missing', variant((r) => delete r.request.operation), 'request.operation'],
  ['operation unknown', variant((r) => (r.request.operation = 'PATCH')), 'request.operation'],
  [
    'kind is a Deployment',
    variant((r) => (r.request.kind = { group: 'apps', version: 'v1', kind: 'Deployment' })),
    'core/v1 Pods only',
  ],
  ['request.kind missing', variant((r) => delete r.request.kind), 'request.kind'],
  ['object missing on CREATE', variant((r) => delete r.request.object), 'request.object: required for CREATE'],
  ['object null on CREATE', variant((r) => (r.request.object = null)), 'request.object: required for CREATE'],
  ['object an array', variant((r) => (r.request.object = [])), 'request.object'],
  [
    'oldObject missing on UPDATE',
    variant((r) => (r.request.operation = 'UPDATE')),
    'request.oldObject: required for UPDATE',
  ],
  ['spec missing', variant((r) => delete r.request.object.spec), 'request.object.spec'],
  ['containers missing', variant((r) => delete r.request.object.spec.containers), 'request.object.spec.containers'],
  ['containers empty', variant((r) => (r.request.object.spec.containers = [])), 'request.object.spec.containers'],
  [
    'containers an object',
    variant((r) => (r.request.object.spec.containers = { a: 1 })),
    'request.object.spec.containers',
  ],
  [
    'container without name',
    variant((r) => delete r.request.object.spec.containers[0].name),
    'request.object.spec.containers[0].name',
  ],
  [
    'container a string',
    variant((r) => (r.request.object.spec.containers[0] = 'model')),
    'request.object.spec.containers[0]',
  ],
  ['limits an array', variant((r) => (r.request.object.spec.containers[0].resources.limits = ['30'])), 'limits'],
  [
    'limit a boolean',
    variant((r) => (r.request.object.spec.containers[0].resources.limits['nvidia.com/vcuda-core'] = true)),
    'nvidia.com/vcuda-core',
  ],
  [
    'initContainers a string',
    variant((r) => (r.request.object.spec.initContainers = 'warm')),
    'request.object.spec.initContainers',
  ],
  [
    'annotations a list',
    variant((r) => (r.request.object.metadata.annotations = ['a=b'])),
    'request.object.metadata.annotations',
  ],
  [
    'annotation value a number',
    variant((r) => (r.request.object.metadata.annotations['nvidia.com/vcuda-core-limit'] = 60)),
    'nvidia.com/vcuda-core-limit',
  ],
  ['metadata missing', variant((r) => delete r.request.object.metadata), 'request.object.metadata'],
  ['metadata a string', variant((r) => (r.request.object.metadata = 'share-30')), 'request.object.metadata'],
  ['object kind Service', variant((r) => (r.request.object.kind = 'Service')), 'request.object.kind'],
  ['userInfo a string', variant((r) => (r.request.userInfo = 'alice')), 'request.userInfo'],
  ['dryRun a string', variant((r) => (r.request.dryRun = 'yes')), 'request.dryRun'],
  ['nodeName a number', variant((r) => (r.request.object.spec.nodeName = 3)), 'request.object.spec.nodeName'],
  ['deeply nested JSON', `${'['.repeat(100000)}${']'.repeat(100000)}`, '(root)'],
  ['oversized body', JSON.stringify({ ...valid, padding: 'x'.repeat(MAX_BODY) }), `exceeds ${MAX_BODY} bytes`],
];

describe('malformed AdmissionReviews get HTTP 400 with a clear message', () => {
  it('has at least 30 distinct cases', () => {
    expect(new Set(malformed.map(([, body]) => body)).size).toBe(malformed.length);
    expect(malformed.length).toBeGreaterThanOrEqual(30);
  });

  it.each(malformed)('%s', async (_name, body, fragment) => {
    for (const hook of ['mutate', 'validate']) {
      const res = await app.request(`/admission/${hook}?timeout=10s`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(res.status).toBe(400);
      const json = (await res.json()) as { error: { code: string; message: string } };
      expect(json.error.code).toBe('invalid');
      expect(json.error.message).toContain(fragment);
    }
  });

  it('still answers a valid review after all of them', async () => {
    const res = await app.request('/admission/mutate', { method: 'POST', body: JSON.stringify(valid) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { response: { allowed: boolean } }).response.allowed).toBe(true);
  });

  it('refuses GET and unknown paths without touching the handlers', async () => {
    expect((await app.request('/admission/mutate')).status).toBe(404);
    expect((await app.request('/admission/other', { method: 'POST', body: '{}' })).status).toBe(404);
  });
});

describe('the plain node listener answers the same malformed reviews the same way', () => {
  const listener = createAdmissionListener(deps);
  const server = http.createServer((req, res) => listener(req, res) || res.writeHead(404).end());
  let port = 0;
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const post = (path: string, body: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-length': Buffer.byteLength(body) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  it.each(malformed)('%s', async (_name, body, fragment) => {
    for (const hook of ['mutate', 'validate']) {
      const sent = await post(`/admission/${hook}?timeout=10s`, body);
      expect(sent.status).toBe(400);
      const json = JSON.parse(sent.text) as { error: { code: string; message: string } };
      expect(json.error.code).toBe('invalid');
      expect(json.error.message).toContain(fragment);
    }
  });

  it('still answers a valid review after all of them', async () => {
    const sent = await post('/admission/mutate', JSON.stringify(valid));
    expect(sent.status).toBe(200);
    expect(JSON.parse(sent.text).response.allowed).toBe(true);
  });
});
