import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { LedgerTimeoutError } from '../db/deadline.js';
import type { AdmissionReviewOut } from './admission-review.js';
import { type AdmissionRoutesDeps, createAdmissionAnswerer } from './admission-routes.js';
import type { QuotaQuery } from './quota-precheck.js';

// Byte-for-byte copies of reviews a real kube-apiserver 1.36.3 sent (see testdata/kubernetes-1.36/README.md).
const fixture = (name: string) =>
  readFileSync(new URL(`./testdata/kubernetes-1.36/${name}.json`, import.meta.url), 'utf8');
const podFixture = readFileSync(
  new URL('./testdata/kubernetes-1.26/admission-mutate-create-share.json', import.meta.url),
  'utf8',
);

function build(extra: Partial<AdmissionRoutesDeps> = {}) {
  const asked: QuotaQuery[] = [];
  const logs: string[] = [];
  const deps: AdmissionRoutesDeps = {
    names: resourceNames(),
    memoryUnitMiB: 1,
    clusterName: 'lab',
    privilegedUsernames: [],
    maxBodyBytes: 64 * 1024,
    logger: { info: (_o, m) => logs.push(m), warn: (_o, m) => logs.push(m) },
    precheckQuota: (q) => {
      asked.push(q);
      return { ok: true };
    },
    authenticateCaller: () => true,
    ...extra,
  };
  return { answer: createAdmissionAnswerer(deps), asked, logs };
}

async function answerOf(
  answer: ReturnType<typeof build>['answer'],
  hook: 'mutate-claims' | 'validate-claims',
  text: string,
) {
  const reply = await answer(hook, text, { authenticated: true });
  return { status: reply.status, json: JSON.parse(reply.body) as AdmissionReviewOut & { error?: { message: string } } };
}

// bad-share asks a 30 share without memory on 2 cards, a firstAvailable alternative of 150 cores
// (its other alternative, 20 cores and 2Gi, is fine) and an opaque config with an unknown field.
const BAD_SHARE_MESSAGE = [
  'vcuda refused resourceclaim team-a/bad-share: 4 problems:',
  'spec.devices.config[0].opaque.parameters: Unrecognized key: "burst"',
  'spec.devices.requests[0].exactly.capacity.requests["memory"]: a share of a card (cores: 30) must state memory',
  'spec.devices.requests[0].exactly.count: 2 cards of a share are not one share; ask whole cards (cores 100, or no capacity request) or one card',
  'spec.devices.requests[1].firstAvailable[0].capacity.requests["cores"]: 150 must be 1..100 (hundredths of one card; 100 is the whole card)',
].join('\n');

describe('claim hooks on the reviews a 1.36 API server sends', () => {
  it.each([
    ['mutate-claims', 'claim-mutate-create-share'],
    ['validate-claims', 'claim-validate-create-share'],
    ['validate-claims', 'claim-validate-create-two-cards'],
    ['mutate-claims', 'template-mutate-create-share'],
    ['validate-claims', 'template-validate-create-share'],
  ] as const)('%s allows %s unchanged', async (hook, name) => {
    const { answer } = build();
    const { status, json } = await answerOf(answer, hook, fixture(name));
    expect(status).toBe(200);
    expect(json.response).toEqual({ uid: JSON.parse(fixture(name)).request.uid, allowed: true });
  });

  it.each(['mutate-claims', 'validate-claims'] as const)(
    '%s refuses bad-share naming every bad field',
    async (hook) => {
      const { answer, asked } = build();
      const name = hook === 'mutate-claims' ? 'claim-mutate-create-bad-share' : 'claim-validate-create-bad-share';
      const { status, json } = await answerOf(answer, hook, fixture(name));
      expect(status).toBe(200);
      expect(json.response.allowed).toBe(false);
      expect(json.response.status?.code).toBe(422);
      expect(json.response.status?.message).toBe(BAD_SHARE_MESSAGE);
      expect(asked).toEqual([]);
    },
  );

  it('never reads, nor pre-checks, a claim of another driver', async () => {
    const { answer } = build({
      precheckQuota: () => {
        throw new Error('must not be asked');
      },
    });
    const text = fixture('claim-validate-create-other-driver');
    for (const hook of ['mutate-claims', 'validate-claims'] as const) {
      const { json } = await answerOf(answer, hook, text);
      expect(json.response).toEqual({ uid: JSON.parse(text).request.uid, allowed: true });
    }
  });

  it("pre-checks the quota of a claim the controller makes from a template, in the pod's namespace", async () => {
    const { answer, asked } = build();
    const { json } = await answerOf(answer, 'mutate-claims', fixture('claim-mutate-create-from-template'));
    expect(json.response.allowed).toBe(true);
    expect(asked).toEqual([
      { cluster: 'lab', namespace: 'team-a', core: 50, memoryMiB: 16 * 1024, holderKind: 'claim' },
    ]);
  });

  it('asks the ledger for a claim at the mutating hook only, never for a template', async () => {
    const { answer, asked } = build();
    await answerOf(answer, 'validate-claims', fixture('claim-validate-create-share'));
    await answerOf(answer, 'mutate-claims', fixture('template-mutate-create-share'));
    expect(asked).toEqual([]);
    await answerOf(answer, 'mutate-claims', fixture('claim-mutate-create-share'));
    expect(asked).toEqual([
      { cluster: 'lab', namespace: 'team-a', core: 30, memoryMiB: 8 * 1024, holderKind: 'claim' },
    ]);
  });

  it("refuses a claim over its namespace's quota with the ledger's words", async () => {
    const message = 'namespace team-a: core 80 + 30 > quota 100';
    const { answer, logs } = build({ precheckQuota: () => ({ ok: false, message }) });
    const { json } = await answerOf(answer, 'mutate-claims', fixture('claim-mutate-create-share'));
    expect(json.response.allowed).toBe(false);
    expect(json.response.status).toEqual({
      code: 403,
      reason: 'Forbidden',
      message: `vcuda refused resourceclaim team-a/share-30: quota: ${message}`,
    });
    expect(logs).toEqual(['refused']);
  });

  it('admits with a warning when the ledger is slow or down: allocation is the gate', async () => {
    const { answer } = build({ precheckQuota: () => Promise.reject(new LedgerTimeoutError('quota pre-check', 5)) });
    const { json } = await answerOf(answer, 'mutate-claims', fixture('claim-mutate-create-share'));
    expect(json.response.allowed).toBe(true);
    expect(json.response.warnings?.[0]).toMatch(/^quota pre-check skipped/);
  });

  it('judges CREATE only: later writes of an existing claim pass whatever its spec', async () => {
    const { answer } = build();
    const update = JSON.parse(fixture('claim-validate-create-bad-share'));
    update.request.operation = 'UPDATE';
    update.request.oldObject = update.request.object;
    const { json } = await answerOf(answer, 'validate-claims', JSON.stringify(update));
    expect(json.response.allowed).toBe(true);
  });

  it('keeps pods and claims apart: each hook answers 400 to the other kind', async () => {
    const { answer } = build();
    const claimAtPodHook = await answer('validate', fixture('claim-validate-create-share'));
    expect(claimAtPodHook.status).toBe(400);
    expect(claimAtPodHook.body).toContain('this webhook admits core/v1 Pods only');
    const podAtClaimHook = await answer('validate-claims', podFixture);
    expect(podAtClaimHook.status).toBe(400);
    expect(podAtClaimHook.body).toContain('resource.k8s.io/v1 ResourceClaims and ResourceClaimTemplates only');
  });

  it.each([
    ['not JSON', '{', 'request body is not JSON'],
    ['empty', ' ', 'request body is empty'],
    [
      'no uid',
      JSON.stringify({ ...JSON.parse(fixture('claim-validate-create-share')), request: { kind: {} } }),
      'request.uid',
    ],
    [
      'a spec of the wrong shape',
      fixture('claim-validate-create-share').replace('"count":1', '"count":"one"'),
      'request.object.spec.devices.requests[0].exactly.count',
    ],
    [
      'a template whose claim spec is of the wrong shape',
      fixture('template-validate-create-share').replace('"requests":[', '"requests":7,"x":['),
      'request.object.spec.spec.devices.requests',
    ],
  ])('answers 400 to %s, naming the field', async (_name, text, want) => {
    const { answer } = build();
    const reply = await answer('validate-claims', text);
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.body).error.message).toContain(want);
  });
});
