/** The Kubernetes adapters against a small HTTP stand-in for the API server (what goes on the wire). */
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventReasons, resourceNames } from '../contract/index.js';
import { jwksFromFile, KubeWriter, PodWatchCache } from './kube-adapters.js';

type Seen = { method: string; url: string; contentType: string; body: unknown };
const seen: Seen[] = [];
const watchers = new Set<import('node:http').ServerResponse>();
let server: Server;
let kc: k8s.KubeConfig;
const tmp = mkdtempSync(join(tmpdir(), 'vcuda-kube-'));

const podList = {
  kind: 'PodList',
  apiVersion: 'v1',
  metadata: { resourceVersion: '42' },
  items: [
    {
      metadata: { name: 'p', namespace: 'ns', uid: 'u1', annotations: { 'vcuda.io/assignment': 'x' } },
      spec: { nodeName: 'n1', containers: [{ name: 'c', resources: { limits: { 'nvidia.com/vcuda-core': '30' } } }] },
      status: { phase: 'Pending' },
    },
  ],
};

function readBody(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve) => {
    let data = '';
    req.on('data', (c) => {
      data += c;
    });
    req.on('end', () => resolve(data ? JSON.parse(data) : undefined));
  });
}

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const body = await readBody(req);
    seen.push({ method: req.method ?? '', url: req.url ?? '', contentType: req.headers['content-type'] ?? '', body });
    res.setHeader('content-type', 'application/json');
    if (req.method === 'GET' && req.url?.startsWith('/api/v1/pods') && req.url.includes('watch=true')) {
      res.writeHead(200);
      res.flushHeaders();
      watchers.add(res);
      req.on('close', () => watchers.delete(res));
      return;
    }
    if (req.method === 'GET' && req.url?.startsWith('/api/v1/pods')) res.end(JSON.stringify(podList));
    else res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, ...((body as object) ?? {}) }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true },
    ],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
});
afterAll(async () => {
  for (const w of watchers) w.end();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(tmp, { recursive: true, force: true });
});

const log = { warn: () => {} };

describe('Kubernetes adapters', () => {
  it('lists only the pods of its node', async () => {
    const cache = new PodWatchCache(kc, 'n1', resourceNames(), log);
    await cache.refresh();
    expect(seen.at(-1)?.url).toBe('/api/v1/pods?fieldSelector=spec.nodeName%3Dn1');
    expect(cache.pods().map((p) => [p.uid, p.gpuContainers[0]?.core])).toEqual([['u1', 30]]);
  });

  it("follows the watch from the list's resourceVersion", async () => {
    const cache = new PodWatchCache(kc, 'n1', resourceNames(), log);
    await cache.start();
    try {
      const watchCall = seen.find((x) => x.url.includes('watch=true'));
      expect(watchCall?.url).toContain('fieldSelector=spec.nodeName%3Dn1');
      expect(watchCall?.url).toContain('resourceVersion=42');
      const added = {
        metadata: { name: 'q', namespace: 'ns', uid: 'u2', annotations: { 'vcuda.io/assignment': 'y' } },
        spec: { nodeName: 'n1', containers: [{ name: 'c', resources: { limits: { 'nvidia.com/vcuda-core': '50' } } }] },
      };
      for (const w of watchers) w.write(`${JSON.stringify({ type: 'ADDED', object: added })}\n`);
      await expect
        .poll(() =>
          cache
            .pods()
            .map((p) => p.uid)
            .sort(),
        )
        .toEqual(['u1', 'u2']);
      for (const w of watchers) w.write(`${JSON.stringify({ type: 'DELETED', object: podList.items[0] })}\n`);
      await expect.poll(() => cache.pods().map((p) => p.uid)).toEqual(['u2']);
    } finally {
      cache.stop();
    }
  });

  it('merge-patches pod and node annotations and node capacity', async () => {
    const w = new KubeWriter(kc, 'n1', log);
    await w.annotatePod('ns', 'p', { 'vcuda.io/allocated-at': '2026-01-01T00:00:00.000Z' });
    expect(seen.at(-1)).toEqual({
      method: 'PATCH',
      url: '/api/v1/namespaces/ns/pods/p',
      contentType: 'application/merge-patch+json',
      body: { metadata: { annotations: { 'vcuda.io/allocated-at': '2026-01-01T00:00:00.000Z' } } },
    });
    await w.patchNodeAnnotations('n1', { 'vcuda.io/heartbeat': 'now' });
    expect(seen.at(-1)).toMatchObject({ method: 'PATCH', url: '/api/v1/nodes/n1' });
    await w.patchNodeCapacity('n1', { 'nvidia.com/vcuda-memory': '1155072' });
    expect(seen.at(-1)).toMatchObject({
      url: '/api/v1/nodes/n1/status',
      contentType: 'application/merge-patch+json',
      body: { status: { capacity: { 'nvidia.com/vcuda-memory': '1155072' } } },
    });
  });

  it('records an event on the pod', async () => {
    const w = new KubeWriter(kc, 'n1', log);
    const before = seen.length;
    w.podEvent({ namespace: 'ns', name: 'p', uid: 'u1' }, eventReasons.allocateFailed, 'pod ns/p: refused');
    await expect.poll(() => seen.length).toBeGreaterThan(before);
    const ev = seen.at(-1) as Seen;
    expect(ev).toMatchObject({ method: 'POST', url: '/api/v1/namespaces/ns/events' });
    expect(ev.body).toMatchObject({
      reason: 'VcudaAllocateFailed',
      type: 'Warning',
      message: 'pod ns/p: refused',
      involvedObject: { kind: 'Pod', name: 'p', namespace: 'ns', uid: 'u1' },
      source: { component: 'vcuda-node-agent', host: 'n1' },
    });
    expect(typeof (ev.body as { firstTimestamp: unknown }).firstTimestamp).toBe('string');
  });

  it('re-reads the JWKS file when it changes (key rotation) and refuses a file that is not a JWKS', async () => {
    const path = join(tmp, 'jwks.json');
    writeFileSync(path, JSON.stringify({ keys: [{ kid: 'a' }] }));
    const jwks = jwksFromFile(path);
    expect((await jwks()).keys.map((k) => k.kid)).toEqual(['a']);
    writeFileSync(path, JSON.stringify({ keys: [{ kid: 'a' }, { kid: 'b' }] }));
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect((await jwks()).keys.map((k) => k.kid)).toEqual(['a', 'b']);
    writeFileSync(path, '{}');
    utimesSync(path, new Date(), new Date(Date.now() + 10_000));
    await expect(jwks()).rejects.toThrow(/not a JWKS/);
    await expect(jwksFromFile(join(tmp, 'missing.json'))()).rejects.toThrow(/JWKS .*missing.json: ENOENT/);
  });
});
