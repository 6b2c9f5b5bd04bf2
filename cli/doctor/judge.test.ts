/** Each of `vcuda doctor`'s verdicts from facts, with real certificates and keys. */
import { beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey, jwksOf } from '../../contract/index.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { type DoctorFacts, failed, formatFindings, judgeAll, type WebhookFacts } from './judge.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const DAY_MS = 86_400_000;
const subject = { dnsNames: ['vcuda-control-plane.vcuda-system.svc'], ipAddresses: [] };

let pki: { caPem: string; certPem: string };
let otherPki: { caPem: string; certPem: string };
let expiredPki: { caPem: string; certPem: string };
let jwks: string;
let kid: string;

beforeAll(async () => {
  pki = await issueServingCertificate(subject, 365, NOW);
  otherPki = await issueServingCertificate(subject, 365, NOW);
  // Issued 400 days ago for 365: the serving certificate ran out 35 days ago, its CA a day later.
  expiredPki = await issueServingCertificate(subject, 365, new Date(NOW.getTime() - 400 * DAY_MS));
  const key = await generateSigningKey('key-1');
  kid = key.kid;
  jwks = JSON.stringify(jwksOf([key]));
});

const hooks = (caBundlePem: string): WebhookFacts[] => [
  { configName: 'vcuda-mutate-pods', kind: 'mutating', hook: 'mutate.pods.vcuda.io', caBundlePem },
  { configName: 'vcuda-validate-pods', kind: 'validating', hook: 'validate.pods.vcuda.io', caBundlePem },
];

function healthy(): DoctorFacts {
  return {
    now: NOW,
    namespace: 'vcuda-system',
    heartbeatStaleMs: 60_000,
    apiServer: { version: 'v1.32.13' },
    webhooks: hooks(pki.caPem),
    servingCertPem: pki.certPem,
    nodes: [
      {
        name: 'gpu-1',
        heartbeat: new Date(NOW.getTime() - 10_000).toISOString(),
        hasInventory: true,
        gpuLabelled: true,
      },
      { name: 'cpu-1', hasInventory: false, gpuLabelled: false },
    ],
    jwks: { jwks, assignmentKids: [kid, kid] },
    pendingPods: [],
    readiness: { status: 200, body: 'ok' },
    extender: {
      url: 'https://127.0.0.1:8444',
      anonymous: { status: 401 },
      withClientCert: { status: 200, body: '{}' },
    },
    migrations: {
      known: [
        { tag: '0000_init', millis: 1 },
        { tag: '0001_pod_holds', millis: 2 },
      ],
      appliedMillis: [1, 2],
    },
  };
}

const problems = (f: DoctorFacts) => judgeAll(f).filter((x) => x.verdict === 'fail' || x.verdict === 'warn');

describe('vcuda doctor verdicts', () => {
  it('a healthy installation has no problem, and every check says ok', () => {
    const findings = judgeAll(healthy());
    expect(findings.map((f) => [f.check, f.verdict])).toEqual([
      ['API server', 'ok'],
      ['webhooks', 'ok'],
      ['node agents', 'ok'],
      ['signing keys', 'ok'],
      ['pending pods', 'ok'],
      ['control plane', 'ok'],
      ['ledger migrations', 'ok'],
      ['scheduler extender', 'ok'],
    ]);
    expect(formatFindings(findings)).toMatch(/^vcuda doctor: no problems found\n {2}ok {4}API server/);
  });

  it('an unreachable API server is one finding, not one per cluster check', () => {
    const f = healthy();
    f.apiServer = { error: 'connect ECONNREFUSED 127.0.0.1:6443' };
    expect(problems(f)).toEqual([
      expect.objectContaining({ check: 'API server', verdict: 'fail', fix: expect.stringContaining('KUBECONFIG') }),
    ]);
  });

  it('missing webhook configurations fail, with the restart that registers them', () => {
    const f = healthy();
    f.webhooks = [];
    expect(problems(f)).toEqual([
      expect.objectContaining({ summary: expect.stringContaining('no mutating webhook configuration') }),
      expect.objectContaining({ summary: expect.stringContaining('no validating webhook configuration') }),
    ]);
    expect(problems(f)[0]!.fix).toContain('kubectl -n vcuda-system rollout restart deploy/vcuda-control-plane');
  });

  it('a serving certificate not signed by the caBundle fails for each webhook', () => {
    const f = healthy();
    f.servingCertPem = otherPki.certPem;
    const found = problems(f);
    expect(found).toHaveLength(2);
    expect(found[0]).toMatchObject({ check: 'certificates', verdict: 'fail' });
    expect(found[0]!.summary).toContain('not signed by any CA of its caBundle');
  });

  it('a caBundle with the old CA and the new one still trusts the new serving certificate', () => {
    const f = healthy();
    f.webhooks = hooks(`${otherPki.caPem}${pki.caPem}`);
    expect(problems(f)).toEqual([]);
  });

  it('an expired serving certificate and CA fail; one expiring within a week warns', () => {
    const f = healthy();
    f.webhooks = hooks(expiredPki.caPem);
    f.servingCertPem = expiredPki.certPem;
    expect(problems(f).map((x) => [x.verdict, x.summary.replace(/\d{4}-.*Z/, 'T')])).toEqual([
      ['fail', "mutate.pods.vcuda.io's CA expired T"],
      ['fail', "validate.pods.vcuda.io's CA expired T"],
      ['fail', "the webhook's serving certificate expired T"],
    ]);
    const soon = healthy();
    soon.now = new Date(NOW.getTime() + 362 * DAY_MS);
    // The serving certificate has 3 days left, its CA (which outlives it by a day) 4.
    const certs = problems(soon).filter((x) => x.check === 'certificates');
    expect(certs.map((x) => [x.verdict, x.summary.split(' expires')[0]])).toEqual([
      ['warn', "mutate.pods.vcuda.io's CA"],
      ['warn', "validate.pods.vcuda.io's CA"],
      ['warn', "the webhook's serving certificate"],
    ]);
  });

  it('a webhook without a usable caBundle fails', () => {
    const f = healthy();
    f.webhooks = hooks('-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n');
    expect(problems(f).map((x) => x.summary)).toEqual([
      'mutate.pods.vcuda.io has no usable caBundle: the API server cannot trust it',
      'validate.pods.vcuda.io has no usable caBundle: the API server cannot trust it',
    ]);
  });

  it('a stale or missing heartbeat fails for that node, with where to look', () => {
    const f = healthy();
    f.nodes = [
      {
        name: 'gpu-1',
        heartbeat: new Date(NOW.getTime() - 61_000).toISOString(),
        hasInventory: true,
        gpuLabelled: true,
      },
      { name: 'gpu-2', heartbeat: 'yesterday', hasInventory: true, gpuLabelled: true },
      { name: 'gpu-3', hasInventory: false, gpuLabelled: true },
    ];
    const found = problems(f);
    expect(found.map((x) => [x.verdict, x.summary])).toEqual([
      ['fail', 'gpu-1: last heartbeat 61 s ago (limit 60 s); the extender places nothing there'],
      ['fail', 'gpu-2: no readable heartbeat (limit 60 s); the extender places nothing there'],
      ['warn', 'gpu-3 is labelled vcuda.io/node=true but has no node agent inventory'],
    ]);
    expect(found[0]!.fix).toContain('--field-selector spec.nodeName=gpu-1');
  });

  it('no node agent anywhere fails', () => {
    const f = healthy();
    f.nodes = [{ name: 'cpu-1', hasInventory: false, gpuLabelled: false }];
    expect(problems(f)[0]!.summary).toContain('no node has a vcuda inventory');
  });

  it('a node agent in DRA mode (a ResourceSlice, no inventory) is no missing agent', () => {
    const f = healthy();
    f.nodes = [{ name: 'gpu-9', hasInventory: false, gpuLabelled: true }];
    f.dra = {
      driver: 'gpu.vcuda.io',
      servedVersions: ['v1'],
      deviceClass: true,
      slices: [{ node: 'gpu-9', devices: 1, shareable: 1 }],
      unallocatedClaims: [],
    };
    expect(problems(f)).toEqual([]);
    expect(judgeAll(f).find((x) => x.check === 'node agents')?.summary).toBe(
      '1 node(s) in DRA mode (ResourceSlices, checked under DRA)',
    );
    f.dra = { ...f.dra, slices: [] };
    expect(problems(f).map((x) => x.check)).toEqual(['node agents', 'node agents', 'DRA driver on nodes']);
  });

  it('a published private JWK fails loudly', async () => {
    const key = await generateSigningKey('leaked');
    const f = healthy();
    f.jwks = { jwks: JSON.stringify({ keys: [key.privateJwk] }), assignmentKids: [] };
    const [finding] = problems(f);
    expect(finding).toMatchObject({ check: 'signing keys', verdict: 'fail' });
    expect(finding!.summary).toContain('PRIVATE key (kid leaked)');
    expect(finding!.fix).toContain('vcuda-signing-keys');
  });

  it('a JWKS that lacks the key assignments are signed with fails (stale key set)', () => {
    const f = healthy();
    f.jwks = { jwks, assignmentKids: ['rotated-2'] };
    expect(problems(f)[0]!.summary).toBe(
      'assignments are signed with key(s) rotated-2 that vcuda-jwks does not publish: node agents refuse them',
    );
  });

  it('a missing, empty or malformed JWKS fails', () => {
    for (const [text, summary] of [
      [undefined, 'no vcuda-jwks ConfigMap'],
      ['{"keys":[]}', 'the published key set is empty'],
      ['{', 'not a JSON key set'],
    ] as const) {
      const f = healthy();
      f.jwks = { jwks: text, assignmentKids: [] };
      expect(problems(f)[0]!.summary).toContain(summary);
    }
  });

  it('Pending vcuda pods are listed with their newest warning, a few of them', () => {
    const f = healthy();
    const pod = (i: number) => ({
      namespace: 'team-a',
      name: `train-${i}`,
      schedulerName: 'vcuda-scheduler',
      createdAt: new Date(NOW.getTime() - 90_000).toISOString(),
      ...(i === 0 ? { lastWarning: 'FailedScheduling: 0/3 nodes are available: 3 quota team-a exceeded' } : {}),
    });
    f.pendingPods = Array.from({ length: 7 }, (_, i) => pod(i));
    const found = problems(f);
    expect(found.map((x) => x.summary)).toEqual([
      'team-a/train-0 Pending for 90 s (scheduler vcuda-scheduler): FailedScheduling: 0/3 nodes are available: 3 quota team-a exceeded',
      ...[1, 2, 3, 4].map(
        (i) => `team-a/train-${i} Pending for 90 s (scheduler vcuda-scheduler): no warning event yet`,
      ),
      'and 2 more',
    ]);
    expect(found.every((x) => x.verdict === 'warn')).toBe(true);
    expect(found[0]!.fix).toBe('kubectl -n team-a describe pod train-0');
  });

  it('names GPU pods the kubelet failed at admission because vcuda did not place them', () => {
    const f = healthy();
    f.unplacedPods = [];
    expect(problems(f)).toEqual([]);
    f.unplacedPods = [
      {
        namespace: 'kube-system',
        name: 'by-hand',
        node: 'gpu-node-1',
        message:
          'Pod was rejected: Allocate failed due to no pod bound to node gpu-node-1 asks 800 nvidia.com/vcuda-core ' +
          'with a verified assignment, which is unexpected',
      },
    ];
    const [found] = problems(f);
    expect(found).toMatchObject({ check: 'unplaced GPU pods', verdict: 'warn' });
    expect(found?.summary).toMatch(/^kube-system\/by-hand on gpu-node-1 failed at admission: .*asks 800/);
    expect(found?.fix).toMatch(/delete pod by-hand; create it again without spec.nodeName/);
  });

  it('an unready control plane names the ledger when the ledger is why', () => {
    const f = healthy();
    f.readiness = { status: 503, body: 'not ready: ledger unreachable: connect ECONNREFUSED' };
    expect(problems(f)).toEqual([
      expect.objectContaining({ check: 'ledger', verdict: 'fail', fix: expect.stringContaining('DATABASE_URL') }),
    ]);
    f.readiness = { error: 'fetch failed' };
    expect(problems(f)[0]).toMatchObject({ check: 'control plane', summary: '/readyz not reachable: fetch failed' });
  });

  it('unapplied migrations fail with vcuda db migrate; a newer ledger warns', () => {
    const f = healthy();
    f.migrations = {
      known: [
        { tag: '0000_init', millis: 1 },
        { tag: '0001_pod_holds', millis: 2 },
      ],
      appliedMillis: [1],
    };
    expect(problems(f)[0]).toMatchObject({
      check: 'ledger migrations',
      summary: '1 of 2 migration(s) not applied: 0001_pod_holds',
      fix: expect.stringMatching(/^vcuda db migrate/),
    });
    f.migrations = { ...f.migrations, appliedMillis: [] };
    expect(problems(f)[0]!.summary).toBe('2 of 2 migration(s) not applied: 0000_init, 0001_pod_holds');
    f.migrations = { ...f.migrations, appliedMillis: [1, 2, 3] };
    expect(problems(f)[0]).toMatchObject({ verdict: 'warn' });
  });

  it('an extender that answers an anonymous caller fails', () => {
    const f = healthy();
    f.extender = { url: 'http://127.0.0.1:8080', anonymous: { status: 200 } };
    expect(problems(f)).toEqual([
      expect.objectContaining({
        check: 'scheduler extender',
        verdict: 'fail',
        summary: expect.stringContaining('answered HTTP 200 to a caller without a client certificate'),
      }),
    ]);
  });

  it('a refusal in the TLS handshake counts as refusing anonymous callers', () => {
    const f = healthy();
    f.extender = { ...f.extender!, anonymous: { handshakeRefused: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' } };
    expect(problems(f)).toEqual([]);
    expect(judgeAll(f).at(-1)!.summary).toContain('in the TLS handshake');
  });

  it('a refused or expired scheduler client certificate fails; an unreachable extender fails', () => {
    const f = healthy();
    f.extender = { ...f.extender!, withClientCert: { status: 403, body: '{"Error":"not allowed"}' } };
    expect(problems(f)[0]!.fix).toContain('extender.allowedClients');
    f.extender = { ...f.extender, withClientCert: { status: 200, body: '' }, clientCertPem: expiredPki.certPem };
    expect(problems(f)[0]!.summary).toMatch(/^the scheduler's client certificate expired/);
    f.extender = { url: 'https://x:8444', anonymous: { error: 'connect ECONNREFUSED' } };
    expect(problems(f)[0]!.summary).toBe('https://x:8444 not reachable: connect ECONNREFUSED');
  });

  it('the plain HTTP port (which refuses every extender call) is named as the wrong port', () => {
    const f = healthy();
    f.extender = {
      url: 'http://127.0.0.1:8080',
      anonymous: { status: 401 },
      withClientCert: { status: 401, body: '' },
    };
    expect(problems(f)[0]!.fix).toContain("point --extender-url at the extender's TLS port");
  });

  it('checks without a target are skipped, not failed', () => {
    const { readiness: _r, extender: _e, migrations: _m, ...f } = healthy();
    const findings = judgeAll(f);
    expect(findings.filter((x) => x.verdict === 'skip').map((x) => x.check)).toEqual([
      'control plane',
      'ledger migrations',
      'scheduler extender',
    ]);
    expect(formatFindings(findings)).toMatch(/^vcuda doctor: no problems found/);
  });

  it('failed() tells an error apart from a fact', () => {
    expect(failed({ error: 'x' })).toBe(true);
    expect(failed({ version: 'v1' })).toBe(false);
    expect(failed(undefined)).toBe(false);
  });
});
