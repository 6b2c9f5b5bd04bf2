import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as net from 'node:net';
import { serve } from '@hono/node-server';
import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { type EventReason, type PodRef, readPodGpuRequest, resourceNames } from '../contract/index.js';
import { createApp } from '../control-plane/app.js';
import { pod } from '../test/builders/pod.js';
import type { AdmissionReviewOut } from './admission-review.js';
import { type AdmissionRoutesDeps, admissionRoutes } from './admission-routes.js';

// Byte-for-byte copies of payloads a real kube-apiserver 1.26 sent (see testdata/kubernetes-1.26/README.md).
const fixtureText = (name: string) =>
  readFileSync(new URL(`./testdata/kubernetes-1.26/admission-${name}.json`, import.meta.url), 'utf8');
const names = resourceNames();
const CONTROL_PLANE = 'system:serviceaccount:vcuda-system:vcuda-control-plane';

type Recorded = { pod: PodRef; reason: EventReason; message: string };

function build(extra: Partial<AdmissionRoutesDeps> = {}) {
  const events: Recorded[] = [];
  const logs: string[] = [];
  const deps: AdmissionRoutesDeps = {
    names,
    memoryUnitMiB: 1,
    clusterName: 'lab',
    privilegedUsernames: [CONTROL_PLANE],
    maxBodyBytes: 3 * 1024 * 1024,
    logger: { info: (_o, m) => logs.push(m), warn: (_o, m) => logs.push(m) },
    events: { record: (p, reason, message) => void events.push({ pod: p, reason, message }) },
    // These reviews stand for the API server's; the caller check has its own tests.
    authenticateCaller: () => true,
    ...extra,
  };
  // Mounted exactly as the control plane mounts it.
  const app = createApp({ admission: admissionRoutes(deps) });
  return { app, events, logs };
}

async function post(app: ReturnType<typeof build>['app'], hook: string, body: string | object) {
  const res = await app.request(`/admission/${hook}?timeout=5s`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as AdmissionReviewOut & { error?: { message: string } } };
}

function review(object: object, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'team-a',
      operation: 'CREATE',
      userInfo: { username: 'alice', groups: ['system:authenticated'] },
      object,
      dryRun: false,
      ...extra,
    },
  };
}

function decodePatch(json: AdmissionReviewOut): fastJsonPatch.Operation[] {
  expect(json.response.patchType).toBe('JSONPatch');
  return JSON.parse(Buffer.from(json.response.patch ?? '', 'base64').toString('utf8'));
}

describe('real Kubernetes 1.26 payloads', () => {
  it('mutate: share-30 with a soft limit 60 keeps its limit and is only labelled', async () => {
    const { app } = build();
    const text = fixtureText('mutate-create-share');
    const { status, json } = await post(app, 'mutate', text);
    expect(status).toBe(200);
    expect(json).toMatchObject({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' });
    expect(json.response).toMatchObject({ uid: '438597a4-63b4-4da0-9522-ce423b151589', allowed: true });
    expect(decodePatch(json)).toEqual([{ op: 'add', path: '/metadata/labels/vcuda.io~1gpu', value: 'true' }]);
    const out = fastJsonPatch.applyPatch(JSON.parse(text).request.object, decodePatch(json), true, false).newDocument;
    expect(out.metadata.labels).toEqual({ app: 'infer', 'vcuda.io/gpu': 'true' });
    expect(out.metadata.annotations).toEqual({ [names.coreLimit]: '60' });
  });

  it('mutate: init + 200 whole + 10 share gets core-limit 10, and stays hard everywhere', async () => {
    const { app } = build({ schedulerName: 'vcuda-scheduler' });
    const text = fixtureText('mutate-create-multi-container');
    const { json } = await post(app, 'mutate', text);
    expect(json.response.uid).toBe('5f5f7d77-24a3-4d44-b03c-5dadd36cc244');
    expect(json.response.allowed).toBe(true);
    const object = JSON.parse(text).request.object;
    const out = fastJsonPatch.applyPatch(object, decodePatch(json), true, false).newDocument;
    expect(out.metadata.annotations).toEqual({ [names.coreLimit]: '10' });
    expect(out.spec.schedulerName).toBe('vcuda-scheduler');
    const req = readPodGpuRequest(out, { names, memoryUnitMiB: 1 });
    expect(req.containers.map((c) => [c.name, c.corePerCard * c.cards, c.mode])).toEqual([
      ['train', 200, 'hard'],
      ['sidecar', 10, 'hard'],
    ]);
  });

  it('mutate: a pod without vcuda resources is allowed with no patch', async () => {
    const { app } = build({ schedulerName: 'vcuda-scheduler' });
    const { json } = await post(app, 'mutate', fixtureText('mutate-create-no-gpu'));
    expect(json.response).toEqual({ uid: 'bc2fe6af-23d8-4625-9bce-166604f84449', allowed: true });
  });

  it('mutate: an UPDATE is allowed with no patch', async () => {
    const { app } = build();
    const { json } = await post(app, 'mutate', fixtureText('mutate-update'));
    expect(json.response).toEqual({ uid: expect.any(String), allowed: true });
  });

  it('validate: share-30 is allowed', async () => {
    const { app } = build();
    const { json } = await post(app, 'validate', fixtureText('validate-create-share'));
    expect(json.response).toEqual({ uid: '01349bfa-1138-4e14-b9a2-acadb97e15a6', allowed: true });
  });

  it('validate: the UPDATE adding an unrelated annotation on a bound pod is allowed', async () => {
    const { app } = build();
    const { json } = await post(app, 'validate', fixtureText('mutate-update'));
    expect(json.response.allowed).toBe(true);
  });

  it('validate: the same UPDATE forging an assignment is refused (403) naming the annotation and user', async () => {
    const { app, events } = build();
    const body = JSON.parse(fixtureText('mutate-update'));
    body.request.object.metadata.annotations['vcuda.io/assignment'] = 'forged';
    const { json } = await post(app, 'validate', body);
    expect(json.response.allowed).toBe(false);
    expect(json.response.status?.code).toBe(403);
    expect(json.response.status?.message).toContain(
      'metadata.annotations["vcuda.io/assignment"]: added by "rig-admin"',
    );
    await Promise.resolve();
    expect(events.map((e) => [e.reason, e.pod.name])).toEqual([['VcudaAdmissionRefused', 'share-30']]);
  });
});

describe('refusals', () => {
  it('lists every violation in one message and records one Event', async () => {
    const { app, events } = build();
    const p = pod('bad')
      .init('warm', { [names.core]: '150' })
      .container('a', { [names.core]: '30' })
      .onNode('n')
      .obj();
    const { status, json } = await post(app, 'mutate', review(p));
    expect(status).toBe(200);
    expect(json.response.allowed).toBe(false);
    expect(json.response.status?.code).toBe(422);
    expect(json.response.status?.message).toBe(
      [
        'vcuda refused pod team-a/bad: 3 problems:',
        'spec.containers[0].resources.limits["nvidia.com/vcuda-memory"]: a share of a card (nvidia.com/vcuda-core: 30) must state nvidia.com/vcuda-memory',
        'spec.initContainers[0].resources.limits["nvidia.com/vcuda-core"]: 150 is neither below 100 nor a multiple of 100',
        'spec.nodeName: "n" is preset; a vcuda pod must be placed by the vcuda scheduler extender, which picks its cards; remove spec.nodeName',
      ].join('\n'),
    );
    expect(json.response.patch).toBeUndefined();
    await Promise.resolve();
    expect(events).toHaveLength(1);
    expect(events[0]?.reason).toBe('VcudaAdmissionRefused');
  });

  it('refuses a memory limit below the request, naming the annotation', async () => {
    const { app } = build();
    const p = pod('burst').share(30, 1024, 'model').memoryLimit('512').obj();
    const { json } = await post(app, 'mutate', review(p));
    expect(json.response.allowed).toBe(false);
    expect(json.response.status?.code).toBe(422);
    expect(json.response.status?.message).toBe(
      'vcuda refused pod team-a/burst: 1 problem:\nmetadata.annotations["nvidia.com/vcuda-memory-limit"]: 512 is below model\'s request of 1024',
    );
  });

  it('records no Event on a dry run', async () => {
    const { app, events } = build();
    const p = pod('bad')
      .container('a', { [names.core]: '150' })
      .obj();
    const { json } = await post(app, 'mutate', review(p, { dryRun: true }));
    expect(json.response.allowed).toBe(false);
    await Promise.resolve();
    expect(events).toEqual([]);
  });

  it('an event recorder that fails is logged, the answer stands', async () => {
    const { app, logs } = build({
      events: {
        record: () => {
          throw new Error('api down');
        },
      },
    });
    const { json } = await post(
      app,
      'mutate',
      review(
        pod('bad')
          .container('a', { [names.core]: '150' })
          .obj(),
      ),
    );
    expect(json.response.allowed).toBe(false);
    await new Promise((r) => setImmediate(r));
    expect(logs).toContain('recording admission event failed');
  });
});

describe('quota pre-check', () => {
  type Asked = { cluster: string; namespace: string; core: number; memoryMiB: number };

  it('asks the ledger with hundredths of a card and known memory (init containers as Kubernetes counts them)', async () => {
    const asked: Asked[] = [];
    const { app } = build({
      precheckQuota: async (q) => {
        asked.push(q);
        return { ok: true };
      },
    });
    const p = pod('p')
      .init('warm', { [names.core]: '50', [names.memory]: '100000' })
      .whole(2, 'train')
      .share(30, 2048, 's')
      .obj();
    const { json } = await post(app, 'mutate', review(p));
    expect(json.response.allowed).toBe(true);
    // Shares may land on a shared MIG instance, which costs less: the most any group asks as shares
    // (the init container's 50, over the app containers' 30) is said apart.
    expect(asked).toEqual([{ cluster: 'lab', namespace: 'team-a', core: 230, shareCore: 50, memoryMiB: 100000 }]);
    expect(json.response.warnings).toContain('quota: whole cards memory is checked at bind');
  });

  it('asks the ledger for the guaranteed memory only, never the burst ceiling', async () => {
    const asked: Asked[] = [];
    const { app } = build({
      precheckQuota: async (q) => {
        asked.push(q);
        return { ok: true };
      },
    });
    const { json } = await post(app, 'mutate', review(pod('p').share(30, 1024).memoryLimit('4096').obj()));
    expect(json.response.allowed).toBe(true);
    expect(asked).toEqual([{ cluster: 'lab', namespace: 'team-a', core: 30, shareCore: 30, memoryMiB: 1024 }]);
  });

  it('refuses early with the ledger message and says what was not counted', async () => {
    const { app, events } = build({
      precheckQuota: async () => ({ ok: false, message: 'namespace team-a uses 350 of 400 core; this pod asks 200' }),
    });
    const { json } = await post(app, 'mutate', review(pod('p').whole(2).obj()));
    expect(json.response.allowed).toBe(false);
    expect(json.response.status?.code).toBe(403);
    expect(json.response.status?.message).toMatch(
      /^vcuda refused pod team-a\/p: quota: namespace team-a uses 350 of 400 core; this pod asks 200 \(whole cards' memory is not counted/,
    );
    await Promise.resolve();
    expect(events.map((e) => e.reason)).toEqual(['VcudaQuotaRefused']);
  });

  it('takes a known answer (no promise, as the cache gives it) as is', async () => {
    const { app } = build({ precheckQuota: () => ({ ok: false, message: 'namespace team-a is full' }) });
    const { json } = await post(app, 'mutate', review(pod('p').share(30, 1024).obj()));
    expect(json.response.allowed).toBe(false);
    expect(json.response.status?.message).toBe('vcuda refused pod team-a/p: quota: namespace team-a is full');
  });

  it('an unreachable ledger does not block admission: allowed with a warning', async () => {
    const { app, logs } = build({
      precheckQuota: async () => {
        throw new Error('connection refused');
      },
    });
    const { json } = await post(app, 'mutate', review(pod('p').share(30, 1024).obj()));
    expect(json.response.allowed).toBe(true);
    expect(json.response.warnings).toEqual([
      'quota pre-check skipped (the ledger failed); the ledger checks the quota at bind',
    ]);
    expect(logs).toContain('quota pre-check skipped');
  });

  it('a silent ledger does not hold the API server: past the deadline the pod is admitted, patched, counted', async () => {
    const skipped: string[] = [];
    const { app } = build({
      // Never answers, like a ledger behind a network partition.
      precheckQuota: () => new Promise(() => undefined),
      precheckTimeoutMs: 50,
      observer: { observe: () => undefined, precheckSkipped: (reason) => void skipped.push(reason) },
    });
    const started = performance.now();
    const { json } = await post(app, 'mutate', review(pod('p').share(30, 1024).obj()));
    expect(performance.now() - started).toBeLessThan(2000);
    expect(json.response.allowed).toBe(true);
    expect(decodePatch(json).map((op) => op.path)).toContain('/metadata/labels');
    expect(json.response.warnings).toEqual([
      'quota pre-check skipped (no answer from the ledger within 50 ms); the ledger checks the quota at bind',
    ]);
    expect(skipped).toEqual(['timeout']);
  });

  it('is not asked for pods without vcuda resources or refused ones', async () => {
    let calls = 0;
    const { app } = build({
      precheckQuota: async () => {
        calls++;
        return { ok: true };
      },
    });
    await post(app, 'mutate', review(pod('p').container('c', { cpu: '1' }).obj()));
    await post(
      app,
      'mutate',
      review(
        pod('p')
          .container('c', { [names.core]: '150' })
          .obj(),
      ),
    );
    expect(calls).toBe(0);
  });
});

describe('responses the API server accepts', () => {
  it('strips forged annotations with warnings of at most 120 characters', async () => {
    const { app } = build();
    const p = pod('p')
      .share(30, 1024)
      .annotate(`vcuda.io/${'x'.repeat(200)}`, 'v')
      .obj();
    const { json } = await post(app, 'mutate', review(p));
    expect(json.response.allowed).toBe(true);
    for (const w of json.response.warnings ?? []) expect(w.length).toBeLessThanOrEqual(120);
    const out = fastJsonPatch.applyPatch(p, decodePatch(json), true, false).newDocument;
    expect(Object.keys(out.metadata?.annotations ?? {})).toEqual([names.coreLimit]);
  });

  it('validate refuses a user removing the vcuda.io/gpu label on UPDATE', async () => {
    const { app } = build();
    const body = JSON.parse(fixtureText('mutate-update'));
    body.request.oldObject.metadata.labels['vcuda.io/gpu'] = 'true';
    const { json } = await post(app, 'validate', body);
    expect(json.response.allowed).toBe(false);
    expect(json.response.status?.message).toContain('metadata.labels["vcuda.io/gpu"]: removed by "rig-admin"');
  });

  it('the validating hook never sends a patch', async () => {
    const { app } = build();
    const { json } = await post(app, 'validate', review(pod('p').share(30, 1024).obj()));
    expect(json.response).toEqual({ uid: 'u-1', allowed: true });
  });

  it('validate refuses CREATE with a vcuda.io annotation that appeared after mutation', async () => {
    const { app } = build();
    const p = pod('p').share(30, 1024).annotate('vcuda.io/assignment', 'x').obj();
    const { json } = await post(app, 'validate', review(p));
    expect(json.response.allowed).toBe(false);
    expect(json.response.status?.code).toBe(403);
  });

  it('names a generateName pod by its prefix and records no Event for it', async () => {
    const { app, events } = build();
    const p = pod('x')
      .container('c', { [names.core]: '150' })
      .obj();
    p.metadata = { namespace: 'team-a', generateName: 'job-' } as never;
    const { json } = await post(app, 'mutate', review(p));
    expect(json.response.status?.message).toContain('pod team-a/job-*');
    await Promise.resolve();
    expect(events).toEqual([]);
  });
});

describe('over a real Node HTTP server', () => {
  async function withServer(run: (port: number) => Promise<void>) {
    const { app } = build({ maxBodyBytes: 64 * 1024 });
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await once(server, 'listening');
    try {
      await run((server.address() as AddressInfo).port);
    } finally {
      server.close();
    }
  }

  function send(port: number, body: Buffer, headers: Record<string, string | number> = {}) {
    return new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port, path: '/admission/mutate?timeout=10s', method: 'POST', headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  it('answers the real payload, refuses a declared oversize body before reading it, and survives a cut-off body', async () => {
    await withServer(async (port) => {
      const valid = Buffer.from(fixtureText('mutate-create-share'));
      const ok = await send(port, valid, { 'content-type': 'application/json', 'content-length': valid.length });
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.text).response.allowed).toBe(true);

      const big = Buffer.alloc(100 * 1024, 'x');
      const tooBig = await send(port, big, { 'content-length': big.length });
      expect(tooBig).toMatchObject({ status: 400, text: expect.stringContaining('exceeds 65536 bytes') });

      const chunked = await send(port, big, { 'transfer-encoding': 'chunked' });
      expect(chunked).toMatchObject({ status: 400, text: expect.stringContaining('exceeds 65536 bytes') });

      // A client that promises 5000 bytes and hangs up after 10.
      await new Promise<void>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => {
          socket.end('POST /admission/mutate HTTP/1.1\r\nhost: x\r\ncontent-length: 5000\r\n\r\n{"apiVersio');
        });
        socket.on('close', () => resolve());
        socket.on('error', () => resolve());
        socket.resume();
      });
      const again = await send(port, valid, { 'content-length': valid.length });
      expect(again.status).toBe(200);
    });
  });
});
