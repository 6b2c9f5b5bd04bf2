import { describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { pod } from '../test/builders/pod.js';
import { type AdmissionRoutesDeps, createAdmissionAnswerer } from './admission-routes.js';
import type { ClaimTemplate } from './pod-claims.js';

const CLASS = 'gpu.vcuda.io';

function answerer(ensure: (t: readonly ClaimTemplate[]) => Promise<void>, extra: Partial<AdmissionRoutesDeps> = {}) {
  return createAdmissionAnswerer({
    names: resourceNames(),
    memoryUnitMiB: 1,
    clusterName: 'lab',
    privilegedUsernames: [],
    maxBodyBytes: 3 << 20,
    logger: { info: () => {}, warn: () => {} },
    draPods: {
      policy: { deviceClassName: CLASS, driverName: CLASS, modeValue: 'dra' },
      ensureTemplates: ensure,
      timeoutMs: 200,
    },
    ...extra,
  });
}

function review(object: object, dryRun = false): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'ml',
      operation: 'CREATE',
      userInfo: { username: 'alice' },
      object,
      dryRun,
    },
  });
}

type Out = { response: { allowed: boolean; patch?: string; status?: { code: number; message: string } } };

describe('the mutating hook in DRA mode', () => {
  it('ensures the templates in the review’s namespace before it allows the pod', async () => {
    const asked: string[] = [];
    const answer = answerer(
      async (ts) => void asked.push(...ts.map((t) => `${t.metadata.namespace}/${t.metadata.name}`)),
    );
    const p = pod('a').share(30, 8192).obj();
    delete (p.metadata as { namespace?: string }).namespace;
    const reply = JSON.parse((await answer('mutate', review(p))).body) as Out;
    expect(reply.response.allowed).toBe(true);
    expect(asked).toEqual(['ml/vcuda-c30-m8gi']);
    const patch = JSON.parse(Buffer.from(reply.response.patch ?? '', 'base64').toString()) as { path: string }[];
    expect(patch.map((o) => o.path)).toContain('/spec/resourceClaims');
  });

  it('writes nothing on a dry run', async () => {
    let calls = 0;
    const answer = answerer(async () => void calls++);
    const reply = JSON.parse((await answer('mutate', review(pod('a').share(30, 8192).obj(), true))).body) as Out;
    expect(reply.response.allowed).toBe(true);
    expect(calls).toBe(0);
  });

  it('refuses the pod, saying why, when the templates cannot be made (or not in time)', async () => {
    const failing = answerer(async () => {
      throw new Error('creating ResourceClaimTemplate ml/vcuda-c30-m8gi: HTTP 403: forbidden');
    });
    const reply = JSON.parse((await failing('mutate', review(pod('a').share(30, 8192).obj()))).body) as Out;
    expect(reply.response.allowed).toBe(false);
    expect(reply.response.status?.code).toBe(500);
    expect(reply.response.status?.message).toBe(
      'vcuda could not ensure ResourceClaimTemplates vcuda-c30-m8gi for pod ml/a: creating ResourceClaimTemplate ml/vcuda-c30-m8gi: HTTP 403: forbidden; retry',
    );
    const slow = answerer(() => new Promise(() => {}));
    const late = JSON.parse((await slow('mutate', review(pod('a').share(30, 8192).obj()))).body) as Out;
    expect(late.response.status?.message).toMatch(/claim templates.*200 ms/);
  });

  it('refuses a bad pod with the same message as in extender mode, and makes nothing', async () => {
    let calls = 0;
    const bad = pod('bad').container('c', { 'nvidia.com/vcuda-core': '30' }).obj();
    const dra = JSON.parse((await answerer(async () => void calls++)('mutate', review(bad))).body) as Out;
    const extender = JSON.parse((await answerer(async () => {}, { draPods: undefined })('mutate', review(bad))).body);
    expect(dra).toEqual(extender);
    expect(dra.response.status?.message).toContain(
      'spec.containers[0].resources.limits["nvidia.com/vcuda-memory"]: a share of a card (nvidia.com/vcuda-core: 30) must state nvidia.com/vcuda-memory',
    );
    expect(calls).toBe(0);
  });

  it('converts a pod asking whole MIG instances too, one template per shape', async () => {
    const asked: string[] = [];
    const answer = answerer(async (ts) => void asked.push(...ts.map((t) => t.metadata.name)));
    const p = pod('m').share(30, 8192, 'side').mig('3g.40gb', 1, 'train').obj();
    const reply = JSON.parse((await answer('mutate', review(p))).body) as Out;
    expect(reply.response.allowed).toBe(true);
    expect(asked).toEqual(['vcuda-c30-m8gi', 'vcuda-mig-3g-40gb-1']);
    const patch = JSON.parse(Buffer.from(reply.response.patch ?? '', 'base64').toString()) as {
      op: string;
      path: string;
    }[];
    expect(patch).toContainEqual({ op: 'remove', path: '/spec/containers/1/resources/limits/nvidia.com~1mig-3g.40gb' });
  });

  it('refuses over quota before it makes any template', async () => {
    let calls = 0;
    const answer = answerer(async () => void calls++, {
      precheckQuota: () => ({ ok: false, message: 'quota ml-50: core limit 50, in use 30, pod asks 30 (over by 10)' }),
    });
    const reply = JSON.parse((await answer('mutate', review(pod('a').share(30, 8192).obj()))).body) as Out;
    expect(reply.response.status?.code).toBe(403);
    expect(calls).toBe(0);
  });
});
