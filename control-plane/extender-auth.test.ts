/**
 * Only kube-scheduler, proven by a client certificate the control plane trusts and naming an
 * allowed client, reaches the extender: every other caller, on any port, is refused before the
 * request does anything (no binding, no ledger row, no Event: no extender handler runs, which the
 * extender's own metrics show), and bodies are bounded.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { allocations } from '../db/schema.js';
import { gpuNode, gpuPod } from '../test/support/control-plane/builders.js';
import { extenderFilesConfig } from '../test/support/control-plane/extender-config.js';
import {
  connectH2,
  postH2,
  postTls,
  type TlsClient,
  tlsPostOptions,
} from '../test/support/control-plane/tls-request.js';
import {
  type IssuedCertificate,
  issueCertificateAuthority,
  issueLeafCertificate,
  issueServingCertificate,
} from '../webhooks/certificates.js';
import type { ClusterState } from './cluster-state.js';
import { type RunningControlPlane, startControlPlane } from './server.js';

const now = new Date('2026-11-22T04:00:30Z');
const later = new Date(now.getTime() + 30 * 86_400_000);

let db: VcudaDb;
let cp: RunningControlPlane;
let state: ClusterState;
let caPem: string;
const clients: Record<'good' | 'otherName' | 'serverOnly' | 'foreignCa', TlsClient> = {} as never;

const logLines: { level: number; msg: string; status?: number; names?: string[] }[] = [];

const bindArgs = { PodName: 'p', PodNamespace: 'default', PodUID: 'uid-p', Node: 'n1' };
// A pod no card can hold: an honest filter of it records a VcudaUnschedulable Warning Event.
const hugePod = gpuPod('huge', [{ core: 50, memoryMiB: 10_000_000 }]);
const filterArgs = { Pod: hugePod, Nodes: null, NodeNames: ['n1'] };

async function leaf(ca: IssuedCertificate, commonName: string, usage: 'client' | 'server') {
  return issueLeafCertificate(ca, { commonName, dnsNames: [commonName], ipAddresses: [], usage }, now, later);
}

async function writeFiles(files: Record<string, string>): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-extender-tls-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
  // The extender's CA (as cert-manager would keep it) and what it issued.
  const ca = await issueCertificateAuthority('test extender CA', now, new Date(later.getTime() + 86_400_000));
  caPem = ca.certPem;
  const serving = await issueLeafCertificate(
    ca,
    { dnsNames: [], ipAddresses: ['127.0.0.1'], usage: 'server' },
    now,
    later,
  );
  const asClient = (c: IssuedCertificate, trust = caPem): TlsClient => ({
    certPem: c.certPem,
    keyPem: c.keyPem,
    caPem: trust,
  });
  clients.good = asClient(await leaf(ca, 'vcuda-scheduler', 'client'));
  clients.otherName = asClient(await leaf(ca, 'vcuda-node-agent', 'client'));
  clients.serverOnly = asClient(await leaf(ca, 'vcuda-scheduler', 'server'));
  const foreign = await issueServingCertificate({ dnsNames: ['vcuda-scheduler'], ipAddresses: [] }, 30, now);
  clients.foreignCa = { certPem: foreign.certPem, keyPem: foreign.keyPem, caPem };
  const dir = await writeFiles({ 'tls.crt': serving.certPem, 'tls.key': serving.keyPem, 'ca.crt': caPem });

  const config = extenderFilesConfig(dir);
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(JSON.parse(line)) });
  cp = await startControlPlane(config, { db, clock: () => now, logger });
  state = cp.state;
  state.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
  state.upsertPod(gpuPod('p', [{ core: 30, memoryMiB: 1024 }]));
  state.upsertPod(hugePod);
});

afterAll(async () => {
  await cp?.close();
  await closeDb(db);
});

async function extenderCalls(): Promise<string[]> {
  const text = await (await fetch(`${cp.url}/metrics`)).text();
  return text
    .split('\n')
    .filter(
      (l) =>
        /^vcuda_extender_(binds_total|request_duration_seconds_count|pods_unschedulable_total)/.test(l) &&
        !l.endsWith(' 0'),
    );
}

async function expectNothingChanged() {
  expect(state.pod('default', 'p')?.spec?.nodeName).toBeUndefined();
  expect(await db.select().from(allocations)).toEqual([]);
  expect(await extenderCalls()).toEqual([]);
}

describe('who may call the extender', () => {
  it('refuses an anonymous bind and filter on the plain-HTTP port with 401, changing nothing', async () => {
    for (const [verb, body] of [
      ['bind', bindArgs],
      ['filter', filterArgs],
      ['prioritize', filterArgs],
    ] as const) {
      const res = await fetch(`${cp.url}/scheduler/${verb}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status, verb).toBe(401);
    }
    await expectNothingChanged();
  });

  it('serves no admission review on the plain-HTTP port either: it holds only what may be public', async () => {
    for (const hook of ['mutate', 'validate']) {
      const res = await fetch(`${cp.url}/admission/${hook}`, { method: 'POST', body: '{}' });
      expect(res.status, hook).toBe(404);
    }
    expect((await fetch(`${cp.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${cp.url}/api/v1/reports`)).status).toBe(200);
  });

  it('refuses with 401, saying why, a caller without a client certificate or with one no trusted CA issued for clients', async () => {
    for (const [who, why] of [
      [{ caPem }, 'UNABLE_TO_GET_ISSUER_CERT\\)|PEER_DID_NOT_RETURN_A_CERTIFICATE'],
      [clients.foreignCa, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
      [clients.serverOnly, 'INVALID_PURPOSE'],
    ] as const) {
      const bind = await postTls(`${cp.extenderUrl}/scheduler/bind`, bindArgs, who);
      expect(bind.status).toBe(401);
      expect(bind.text).toMatch(new RegExp(why));
      expect((await postTls(`${cp.extenderUrl}/scheduler/filter`, filterArgs, who)).status).toBe(401);
    }
    await expectNothingChanged();
  });

  it('refuses a client certificate of the trusted CA that names another client with 403', async () => {
    const bind = await postTls(`${cp.extenderUrl}/scheduler/bind`, bindArgs, clients.otherName);
    expect(bind.status).toBe(403);
    expect(bind.text).toContain('vcuda-node-agent');
    expect((await postTls(`${cp.extenderUrl}/scheduler/filter`, filterArgs, clients.otherName)).status).toBe(403);
    // Logged as a warning, naming what the certificate claims.
    const warned = logLines.filter((l) => l.msg === 'extender call refused' && l.status === 403);
    expect(warned.map((l) => [l.level, l.names])).toEqual([
      [40, ['vcuda-node-agent']],
      [40, ['vcuda-node-agent']],
    ]);
    await expectNothingChanged();
  });

  it('refuses a body past the limit with 413 from its Content-Length, before reading it', async () => {
    const res = await postTlsDeclared(`${cp.extenderUrl}/scheduler/filter`, 100 * 1024 * 1024, clients.good);
    expect(res.status).toBe(413);
    await expectNothingChanged();
  });

  it('cuts a 100 MB chunked body at the limit: 413, and the process does not buffer it', async () => {
    const before = process.memoryUsage().rss;
    const res = await postTlsChunked(`${cp.extenderUrl}/scheduler/filter`, 100 * 1024 * 1024, clients.good);
    expect(res.status).toBe(413);
    expect(res.sentBytes).toBeLessThan(50 * 1024 * 1024);
    expect(process.memoryUsage().rss - before).toBeLessThan(50 * 1024 * 1024);
    await expectNothingChanged();
  });

  it('answers the scheduler’s certificate: filter records its Warning Event, bind binds and reserves', async () => {
    const filter = await postTls(`${cp.extenderUrl}/scheduler/filter`, filterArgs, clients.good);
    expect(filter.status).toBe(200);
    expect((filter.json() as { NodeNames: string[] }).NodeNames).toEqual([]);
    // The filter ran and recorded the pod unschedulable (the Event goes with this count).
    expect(await extenderCalls()).toContain('vcuda_extender_pods_unschedulable_total 1');

    const bind = await postTls(`${cp.extenderUrl}/scheduler/bind`, bindArgs, clients.good);
    expect(bind.json()).toEqual({ Error: '' });
    expect(state.pod('default', 'p')?.spec?.nodeName).toBe('n1');
    expect((await db.select().from(allocations)).map((a) => a.podUid)).toContain('uid-p');
  });

  it('speaks HTTP/2 to a client that offers it, as kube-scheduler does: one session for concurrent verbs, the same gate', async () => {
    const good = await connectH2(cp.extenderUrl, clients.good);
    const other = await connectH2(cp.extenderUrl, clients.otherName);
    const anonymous = await connectH2(cp.extenderUrl, { caPem });
    try {
      expect(good.alpnProtocol).toBe('h2');
      const filters = await Promise.all(Array.from({ length: 8 }, () => postH2(good, '/scheduler/filter', filterArgs)));
      expect(filters.map((f) => f.status)).toEqual(filters.map(() => 200));
      expect((await postH2(other, '/scheduler/bind', bindArgs)).status).toBe(403);
      expect((await postH2(anonymous, '/scheduler/bind', bindArgs)).status).toBe(401);
    } finally {
      for (const s of [good, other, anonymous]) s.destroy();
    }
  });
});

type Sent = { status: number; sentBytes: number };

/** Declares a huge Content-Length and sends only a little of it. */
function postTlsDeclared(url: string, declared: number, client: TlsClient): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const req = request(url, tlsPostOptions(client, { 'content-length': declared }), (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, sentBytes: 0 });
      req.destroy();
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    req.write('{"Pod":');
  });
}

/** Streams `total` bytes chunked from one reused buffer, stopping when the answer comes or the server hangs up. */
function postTlsChunked(url: string, total: number, client: TlsClient): Promise<Sent> {
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const req = request(url, tlsPostOptions(client, {}), (res) => {
      answered = true;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, sentBytes: sent }));
      req.destroy();
    });
    req.on('error', (err) => (answered ? undefined : reject(err)));
    const pump = () => {
      while (!answered && sent < total) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', pump);
      }
      if (!answered) req.end();
    };
    pump();
  });
}
