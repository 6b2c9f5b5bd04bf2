/**
 * The webhook port answers whoever reaches it, but only the API server, proven by the client
 * certificate or the token its AdmissionConfiguration gives it, makes a review leave anything
 * behind: an Event on the pod, a refusal log line, a dashboard row. A flood from anyone else is
 * answered and forgotten; the API server's repeats of one refusal make one aggregated Event.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { type FakeKubeApi, startFakeKubeApi } from '../test/support/control-plane/fake-kube-api.js';
import { connectH2, postH2, postTls, type TlsClient } from '../test/support/control-plane/tls-request.js';
import {
  type IssuedCertificate,
  issueCertificateAuthority,
  issueLeafCertificate,
  issueServingCertificate,
} from '../webhooks/certificates.js';
import { loadControlPlaneConfig } from './config.js';
import { type RunningControlPlane, startControlPlane } from './server.js';

const now = new Date();
const later = new Date(now.getTime() + 30 * 86_400_000);
const TOKEN = 'api-server-admission-token-0123456789';

let db: VcudaDb;
let api: FakeKubeApi;
let cp: RunningControlPlane;
let servingCa: string;
const clients: Record<'apiServer' | 'otherName' | 'foreignCa' | 'schedulerName', TlsClient> = {} as never;
const logLines: { msg: string; pod?: string }[] = [];

/** A mutate review of a pod vcuda refuses (150 core is neither a share nor whole cards). */
function refusedReview(name: string, namespace = 'kube-system'): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${name}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'mallory' },
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace },
        spec: { containers: [{ name: 'c', image: 'x', resources: { limits: { 'nvidia.com/vcuda-core': '150' } } }] },
      },
    },
  });
}

const refusalEvents = () => api.events.filter((e) => (e as { reason?: string }).reason === 'VcudaAdmissionRefused');
const refusalLogLines = () => logLines.filter((l) => l.msg === 'refused');
async function dashboardRefusals(): Promise<{ pod: string }[]> {
  const overview = (await (await fetch(`${cp.url}/ui/overview`)).json()) as { refusals: { pod: string }[] };
  return overview.refusals;
}
const settle = () => new Promise((r) => setTimeout(r, 200));

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
  api = await startFakeKubeApi();
  const serving = await issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 30, now);
  servingCa = serving.caPem;
  // The CA that signs the API server's client certificate (kubeadm: the cluster CA), and a stranger's.
  const callersCa = await issueCertificateAuthority('test cluster CA', now, new Date(later.getTime() + 86_400_000));
  const foreignCa = await issueCertificateAuthority('someone else', now, new Date(later.getTime() + 86_400_000));
  const client = async (ca: IssuedCertificate, commonName: string): Promise<TlsClient> => {
    const leaf = await issueLeafCertificate(
      ca,
      { commonName, dnsNames: [], ipAddresses: [], usage: 'client' },
      now,
      later,
    );
    return { certPem: leaf.certPem, keyPem: leaf.keyPem, caPem: servingCa };
  };
  clients.apiServer = await client(callersCa, 'kube-apiserver-kubelet-client');
  clients.otherName = await client(callersCa, 'alice');
  clients.foreignCa = await client(foreignCa, 'kube-apiserver-kubelet-client');
  clients.schedulerName = await client(callersCa, 'vcuda-scheduler');
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-callers-'));
  const files = { 'tls.crt': serving.certPem, 'tls.key': serving.keyPem, 'callers-ca.crt': callersCa.certPem };
  for (const [name, text] of Object.entries({ ...files, token: `${TOKEN}\n` })) writeFileSync(join(dir, name), text);
  const config = loadControlPlaneConfig({
    flags: {
      logLevel: 'info',
      host: '127.0.0.1',
      port: 0,
      httpsPort: 8443,
      kube: { mode: 'kubeconfig' },
      webhookRegistration: 'off',
      signingKeys: { source: 'ephemeral' },
      extender: { port: 0 },
      webhook: {
        certificates: { mode: 'files', certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') },
        callers: { clientCAFile: join(dir, 'callers-ca.crt'), tokenFile: join(dir, 'token') },
      },
    },
  });
  const logger = pino({ level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line)) });
  cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig, logger, httpsPort: 0 });
});

afterAll(async () => {
  await cp?.close();
  await api?.close();
  await closeDb(db);
});

describe('a caller that is not the API server', () => {
  it('floods 3,000 refused reviews into kube-system: all answered, no Event, no log line, no dashboard row', async () => {
    const session = await connectH2(cp.httpsUrl as string, { caPem: servingCa });
    try {
      for (let batch = 0; batch < 30; batch++) {
        const answers = await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            postH2(session, '/admission/mutate?timeout=5s', refusedReview(`flood-${batch * 100 + i}`)),
          ),
        );
        for (const a of answers) {
          expect(a.status).toBe(200);
          expect((a.json() as { response: { allowed: boolean } }).response.allowed).toBe(false);
        }
      }
    } finally {
      session.destroy();
    }
    await settle();
    expect(refusalEvents()).toEqual([]);
    expect(refusalLogLines()).toEqual([]);
    expect(await dashboardRefusals()).toEqual([]);
    const metrics = await (await fetch(`${cp.url}/metrics`)).text();
    expect(metrics).toMatch(/vcuda_admission_unauthenticated_reviews_total\{hook="mutate"\} 3000/);
  });

  it('neither does a certificate of another CA, one naming someone else, or a wrong token', async () => {
    for (const client of [clients.foreignCa, clients.otherName]) {
      const a = await postTls(`${cp.httpsUrl}/admission/mutate`, refusedReview('by-cert'), client);
      expect(a.status).toBe(200);
    }
    expect(await fetchTls('/admission/mutate', refusedReview('by-token'), `Bearer ${TOKEN}x`)).toBe(200);
    await settle();
    expect(refusalEvents()).toEqual([]);
    expect(refusalLogLines()).toEqual([]);
  });
});

describe('the API server', () => {
  it('with its client certificate: 50 refusals of one pod make one Event, counted, and one log line', async () => {
    const session = await connectH2(cp.httpsUrl as string, clients.apiServer);
    try {
      for (let i = 0; i < 50; i++) {
        const a = await postH2(session, '/admission/mutate', refusedReview('team-pod', 'team-a'));
        expect((a.json() as { response: { allowed: boolean } }).response.allowed).toBe(false);
      }
    } finally {
      session.destroy();
    }
    await expect.poll(() => refusalEvents().length).toBe(1);
    expect(refusalEvents()[0]).toMatchObject({
      involvedObject: { namespace: 'team-a', name: 'team-pod' },
      type: 'Warning',
      source: { component: 'vcuda-webhook' },
    });
    expect(refusalLogLines()).toHaveLength(1);
    // The overview is cached for one stream interval (2 s), and the flood above just read it.
    await expect
      .poll(async () => (await dashboardRefusals()).map((r) => r.pod), { timeout: 5000 })
      .toEqual(['team-pod']);
  });

  it('with its bearer token over HTTP/1.1: its refusal is recorded', async () => {
    const res = await fetchTls('/admission/validate', refusedReview('token-pod', 'team-b'), `Bearer ${TOKEN}`);
    expect(res).toBe(200);
    await expect
      .poll(() =>
        refusalEvents().map((e) => (e as unknown as { involvedObject: { name: string } }).involvedObject.name),
      )
      .toContain('token-pod');
  });

  it('its client CA never opens the extender: a certificate naming vcuda-scheduler gets 401 on the webhook port', async () => {
    const bind = { PodName: 'p', PodNamespace: 'default', PodUID: 'uid-p', Node: 'n1' };
    expect((await postTls(`${cp.httpsUrl}/scheduler/bind`, bind, clients.schedulerName)).status).toBe(401);
  });
});

/** An HTTP/1.1 POST with an Authorization header, trusting the serving CA. */
async function fetchTls(path: string, body: string, authorization: string): Promise<number> {
  const { request } = await import('node:https');
  return new Promise((resolve, reject) => {
    const req = request(
      `${cp.httpsUrl}${path}`,
      {
        method: 'POST',
        ca: servingCa,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), authorization },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
