/**
 * The charge webhook as kube-apiserver calls it: an AdmissionReview of a ResourceClaim status
 * UPDATE that writes an allocation is allowed only when the ledger (PGlite here) charged it;
 * past the quota, unauthenticated, or with the ledger silent, the write is refused and nothing is
 * charged; dry runs and writes that change no allocation pass untouched.
 */
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DraClaim, MIB } from '../../contract/index.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/db/test-databases.js';
import { ClaimBuilder } from '../../test/support/node-agent/dra-claim.js';
import { claimChargeRoute, createClaimChargeMetrics } from './claim-charge-route.js';
import { type ClaimLedger, createClaimLedger } from './claim-ledger.js';

const DRIVER = 'gpu.vcuda.io';
const silentLog = { warn: () => undefined };

/** The claim as stored: allocated (`cores` of gpu-0 with 1 GiB) or, without `cores`, not yet. */
function claim(uid: string, cores?: number): DraClaim {
  const builder = new ClaimBuilder(`c-${uid}`, uid, 'ml', 'node-1', DRIVER);
  return cores === undefined
    ? { metadata: builder.ref() }
    : builder.share('gpu-0', cores, 1024 * MIB, { request: 'gpu' }).obj();
}

function review(uid: string, cores: number, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `r-${uid}`,
      kind: { group: 'resource.k8s.io', version: 'v1', kind: 'ResourceClaim' },
      resource: { group: 'resource.k8s.io', version: 'v1', resource: 'resourceclaims' },
      subResource: 'status',
      operation: 'UPDATE',
      userInfo: { username: 'system:kube-scheduler' },
      object: claim(uid, cores),
      oldObject: claim(uid),
      ...extra,
    },
  };
}

type Answer = { response: { allowed: boolean; status?: { code: number; message: string } } };

describe('the claim charge webhook', () => {
  let t: TestDatabase;
  let ledger: Ledger;
  let claims: ClaimLedger;
  const registry = new Registry();
  const metrics = createClaimChargeMetrics(registry);
  const post = async (body: unknown, opts: { authenticated?: boolean; claims?: ClaimLedger } = {}) => {
    const app = claimChargeRoute({
      claims: opts.claims ?? claims,
      driver: DRIVER,
      maxBodyBytes: 64 * 1024,
      timeoutMs: 300,
      authenticate: () => opts.authenticated ?? true,
      logger: silentLog,
      metrics,
    });
    const res = await app.request('/', {
      method: 'POST',
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Answer & { error?: { message: string } } };
  };
  const held = async () => (await ledger.liveClaimHolders('c1')).map((h) => h.holder).sort();

  beforeAll(async () => {
    t = await createTestDatabase('pglite');
    ledger = createLedger(t.db, { clock: () => new Date(), groupCommit: false });
    claims = createClaimLedger({ ledger, cluster: 'c1', driver: DRIVER });
    await ledger.upsertNode('c1', 'node-1', [{ uuid: 'GPU-a', index: 0, model: 'H100', memoryMiB: 81_920 }]);
    await ledger.setQuota({
      name: 'ml-50',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 50,
      memoryLimitMiB: 100_000,
    });
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('allows an allocation the ledger charged, refuses one past the quota in its words', async () => {
    expect((await post(review('a', 30))).json.response.allowed).toBe(true);
    const refused = (await post(review('b', 30))).json.response;
    expect(refused.allowed).toBe(false);
    expect(refused.status).toMatchObject({ code: 403 });
    expect(refused.status?.message).toContain('quota ml-50 (namespace c1/ml): core limit 50, in use 30');
    expect(await held()).toEqual(['claim:a']);
  });

  it('charges nothing for an unauthenticated caller or a dry run, and lets writes that change no allocation pass', async () => {
    const anonymous = await post(review('x', 10), { authenticated: false });
    expect(anonymous.json.response).toMatchObject({ allowed: false, status: { code: 401 } });
    expect((await post(review('y', 10, { dryRun: true }))).json.response.allowed).toBe(true);
    const unchanged = review('a', 30, { oldObject: claim('a', 30) });
    expect((await post(unchanged)).json.response.allowed).toBe(true);
    expect(await held()).toEqual(['claim:a']);
  });

  it('releases when the resourceclaim controller clears the allocation', async () => {
    const clear = review('a', 0, { object: claim('a'), oldObject: claim('a', 30) });
    expect((await post(clear)).json.response.allowed).toBe(true);
    expect(await held()).toEqual([]);
  });

  it('refuses the write when the ledger does not answer in time', async () => {
    const silent: ClaimLedger = { apply: () => new Promise(() => undefined), reconcile: claims.reconcile };
    const answer = await post(review('z', 10), { claims: silent });
    expect(answer.json.response.allowed).toBe(false);
    expect(answer.json.response.status?.message).toMatch(/claim charge/);
  });

  it('answers a malformed or oversized review with 400 naming the field', async () => {
    const bad = review('m', 10);
    (bad.request as Record<string, unknown>).kind = { group: 'resource.k8s.io', version: 'v1', kind: 'Pod' };
    const malformed = await post(bad);
    expect(malformed.status).toBe(400);
    expect(malformed.json.error?.message).toContain('request.kind.kind');
    expect((await post('x'.repeat(70 * 1024))).status).toBe(400);
  });

  it('counts every write that touched the ledger by result on the registry /metrics serves', async () => {
    const text = await registry.metrics();
    const count = (result: string) =>
      Number(new RegExp(`vcuda_claim_charges_total\\{result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    // a charged; b refused by the quota; a released; z with the ledger silent.
    expect([count('charged'), count('refused'), count('released'), count('error')]).toEqual([1, 1, 1, 1]);
  });
});
