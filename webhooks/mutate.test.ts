import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { type PodLike, readPodGpuRequest, resourceNames } from '../contract/index.js';
import { pod } from '../test/builders/pod.js';
import { escapePointerToken } from './json-patch.js';
import {
  chooseHardCoreLimit,
  type MutationPolicy,
  type MutationResult,
  mutatePodCreate,
  VCUDA_POD_LABEL,
} from './mutate.js';

const names = resourceNames();
const policy: MutationPolicy = {
  quantity: { names, memoryUnitMiB: 1 },
  privilegedUsernames: new Set(['system:serviceaccount:vcuda-system:vcuda-control-plane']),
};

const labelOp = { op: 'add', path: '/metadata/labels', value: { [VCUDA_POD_LABEL]: 'true' } };

function admitted(result: MutationResult) {
  if (result.kind !== 'admitted') throw new Error(`expected admitted, got ${JSON.stringify(result)}`);
  return result;
}

/** Applies the patch the way the API server does, on a copy, and returns the result. */
function applied<T extends object>(obj: T, result: MutationResult): T {
  const { patch } = admitted(result);
  return fastJsonPatch.applyPatch(structuredClone(obj), patch as fastJsonPatch.Operation[], true, false).newDocument;
}

describe('mutatePodCreate', () => {
  it('leaves a pod without vcuda resources alone', () => {
    const p = pod('web').container('web', { cpu: '1' }).annotate('vcuda.io/assignment', 'x').obj();
    expect(mutatePodCreate(p, policy)).toEqual({ kind: 'not-vcuda' });
  });

  it('injects the hard core limit = request when absent', () => {
    const p = pod('a').share(30, 8192).obj();
    const out = applied(p, mutatePodCreate(p, policy));
    expect(out.metadata?.annotations?.[names.coreLimit]).toBe('30');
    const req = readPodGpuRequest(out, policy.quantity);
    expect(req.containers.map((c) => [c.coreLimit, c.mode])).toEqual([[30, 'hard']]);
  });

  it('creates the annotations map when the pod has none', () => {
    const p = pod('a').share(25, 1024).obj() as PodLike;
    delete p.metadata?.annotations;
    const result = admitted(mutatePodCreate(p, policy));
    expect(result.patch).toEqual([
      { op: 'add', path: '/metadata/annotations', value: { [names.coreLimit]: '25' } },
      labelOp,
    ]);
    expect(applied(p, result).metadata?.annotations).toEqual({ [names.coreLimit]: '25' });
  });

  it('replaces annotations: null with a map', () => {
    const p = pod('a').share(25, 1024).obj() as PodLike;
    (p.metadata as { annotations: unknown }).annotations = null;
    expect(applied(p, mutatePodCreate(p, policy)).metadata?.annotations).toEqual({ [names.coreLimit]: '25' });
  });

  it('keeps a valid soft limit and adds nothing', () => {
    const p = pod('a').share(30, 8192).coreLimit(60).obj();
    const result = admitted(mutatePodCreate(p, policy));
    expect(result.patch).toEqual([labelOp]);
    expect(result.request.containers[0]?.mode).toBe('soft');
  });

  it('injects 100 for a pod of whole cards only', () => {
    const p = pod('a').whole(2).obj();
    expect(applied(p, mutatePodCreate(p, policy)).metadata?.annotations?.[names.coreLimit]).toBe('100');
  });

  it('admits whole MIG instances to the vcuda scheduler without a core limit, and a mixed pod at its share size', () => {
    const p = pod('a').mig('3g.40gb', 2).obj();
    const withScheduler = { ...policy, schedulerName: 'vcuda-scheduler' };
    const result = admitted(mutatePodCreate(p, withScheduler));
    expect(result.patch).toEqual([labelOp, { op: 'add', path: '/spec/schedulerName', value: 'vcuda-scheduler' }]);
    expect(result.request.containers).toMatchObject([{ mig: '3g.40gb', cards: 2, coreLimit: 100, mode: 'hard' }]);
    const mixed = pod('b').mig('1g.10gb', 1, 'infer').share(20, 1024, 'side').obj();
    expect(applied(mixed, mutatePodCreate(mixed, policy)).metadata?.annotations?.[names.coreLimit]).toBe('20');
  });

  it('injects the share size when whole cards and one share size are mixed', () => {
    const p = pod('a').whole(2, 'train').share(10, 1024, 'sidecar').obj();
    const out = applied(p, mutatePodCreate(p, policy));
    expect(out.metadata?.annotations?.[names.coreLimit]).toBe('10');
    const req = readPodGpuRequest(out, policy.quantity);
    expect(req.containers.map((c) => [c.name, c.coreLimit, c.mode])).toEqual([
      ['train', 100, 'hard'],
      ['sidecar', 10, 'hard'],
    ]);
  });

  it('leaves the limit absent for shares of different sizes: each stays hard at its own request', () => {
    const p = pod('a').share(10, 1024, 'x').share(20, 1024, 'y').obj();
    const result = admitted(mutatePodCreate(p, policy));
    expect(result.patch).toEqual([labelOp]);
    const req = readPodGpuRequest(applied(p, result), policy.quantity);
    expect(req.containers.map((c) => [c.coreLimit, c.mode])).toEqual([
      [10, 'hard'],
      [20, 'hard'],
    ]);
    expect(chooseHardCoreLimit(req)).toBeUndefined();
  });

  it('warns each bursting container that its burst may land in host memory vcuda does not reserve', () => {
    const p = pod().share(30, 1024, 'model').share(20, 3072, 'side').memoryLimit(3072).obj();
    expect(admitted(mutatePodCreate(p, policy)).warnings).toEqual([
      'burst: model may hold 2048 MiB/card above its request, evictable to host RAM vcuda does not reserve',
    ]);
    expect(admitted(mutatePodCreate(pod().share(30, 1024).obj(), policy)).warnings).toEqual([]);
  });

  it('strips every vcuda.io annotation with a warning, keeps the others, escapes the keys', () => {
    const p = pod('a')
      .share(30, 1024)
      .annotate('vcuda.io/assignment', 'eyJhbGciOi.forged.sig')
      .annotate('vcuda.io/assigned-node', 'node-1')
      .annotate('vcuda.io/odd~key/x', 'y')
      .annotate('team.example.com/owner', 'ml')
      .obj();
    const result = admitted(mutatePodCreate(p, policy));
    expect(result.patch.filter((op) => op.op === 'remove').map((op) => op.path)).toEqual([
      '/metadata/annotations/vcuda.io~1assigned-node',
      '/metadata/annotations/vcuda.io~1assignment',
      '/metadata/annotations/vcuda.io~1odd~0key~1x',
    ]);
    expect(result.warnings).toHaveLength(3);
    expect(result.warnings[0]).toContain('vcuda.io/assigned-node');
    const out = applied(p, result);
    expect(out.metadata?.annotations).toEqual({ 'team.example.com/owner': 'ml', [names.coreLimit]: '30' });
  });

  it('strips forged annotations even when the user also set a soft limit', () => {
    const p = pod('a').share(30, 1024).coreLimit(50).annotate('vcuda.io/allocated-at', 'now').obj();
    const out = applied(p, mutatePodCreate(p, policy));
    expect(out.metadata?.annotations).toEqual({ [names.coreLimit]: '50' });
  });

  it('labels the pod as a vcuda pod, keeping other labels and replacing forged vcuda.io ones', () => {
    const p = pod('a').share(30, 1024).obj() as PodLike & { metadata: { labels?: Record<string, string> } };
    p.metadata.labels = { app: 'infer', [VCUDA_POD_LABEL]: 'false', 'vcuda.io/tier': 'gold' };
    const result = admitted(mutatePodCreate(p, policy));
    expect(applied(p, result).metadata.labels).toEqual({ app: 'infer', [VCUDA_POD_LABEL]: 'true' });
    expect(result.warnings).toEqual(['removed label vcuda.io/tier: the vcuda.io/ prefix is written by vcuda only']);
    const already = structuredClone(p);
    already.metadata.labels = { [VCUDA_POD_LABEL]: 'true' };
    expect(admitted(mutatePodCreate(already, policy)).patch.some((op) => op.path.includes('labels'))).toBe(false);
  });

  it('points a default-scheduler pod at the configured profile', () => {
    const p = { ...pod('a').share(30, 1024).obj() };
    (p.spec as { schedulerName?: string }).schedulerName = 'default-scheduler';
    const out = applied(p, mutatePodCreate(p, { ...policy, schedulerName: 'vcuda-scheduler' }));
    expect((out.spec as { schedulerName?: string }).schedulerName).toBe('vcuda-scheduler');
  });

  it('adds schedulerName when absent and keeps another custom scheduler with a warning', () => {
    const p = pod('a').share(30, 1024).obj();
    const out = applied(p, mutatePodCreate(p, { ...policy, schedulerName: 'vcuda-scheduler' }));
    expect((out.spec as { schedulerName?: string }).schedulerName).toBe('vcuda-scheduler');
    const custom = pod('b').share(30, 1024).obj();
    (custom.spec as { schedulerName?: string }).schedulerName = 'volcano';
    const result = admitted(mutatePodCreate(custom, { ...policy, schedulerName: 'vcuda-scheduler' }));
    expect(result.patch.some((op) => op.path === '/spec/schedulerName')).toBe(false);
    expect(result.warnings.join()).toContain('volcano');
  });

  it('honours another resource domain and memory unit', () => {
    const tencent = resourceNames('tencent.com');
    const p = pod('a', 'tencent.com').share(50, 4).obj();
    const out = applied(p, mutatePodCreate(p, { ...policy, quantity: { names: tencent, memoryUnitMiB: 256 } }));
    expect(out.metadata?.annotations?.['tencent.com/vcuda-core-limit']).toBe('50');
    expect(
      mutatePodCreate(pod('n').share(50, 4).obj(), { ...policy, quantity: { names: tencent, memoryUnitMiB: 256 } }),
    ).toEqual({
      kind: 'not-vcuda',
    });
  });

  it('refuses with every violation listed (init containers included), still reporting stripped annotations', () => {
    const p = pod('bad')
      .init('warm', { [names.core]: '150' })
      .share(30, 0, 'a')
      .container('b', { [names.core]: '0.5' })
      .coreLimit(101)
      .annotate('vcuda.io/assignment', 'x')
      .onNode('gpu-1')
      .obj();
    const result = mutatePodCreate(p, policy);
    expect(result.kind).toBe('refused');
    if (result.kind !== 'refused') return;
    expect(result.errors.map((e) => `${e.path} ${e.rule}`)).toEqual([
      'metadata.annotations["nvidia.com/vcuda-core-limit"] core-limit-range',
      'spec.containers[0].resources.limits["nvidia.com/vcuda-memory"] memory-positive',
      'spec.containers[1].resources.limits["nvidia.com/vcuda-core"] whole-number',
      'spec.initContainers[0].resources.limits["nvidia.com/vcuda-core"] core-share-or-whole',
      'spec.nodeName node-name-preset',
    ]);
    expect(result.warnings.join()).toContain('vcuda.io/assignment');
  });
});

describe('escapePointerToken', () => {
  it.each([
    ['nvidia.com/vcuda-core-limit', 'nvidia.com~1vcuda-core-limit'],
    ['a~b/c', 'a~0b~1c'],
    ['~1', '~01'],
    ['/~', '~1~0'],
    ['plain', 'plain'],
  ])('%s -> %s', (key, token) => {
    expect(escapePointerToken(key)).toBe(token);
    // And the pointer reaches exactly that key.
    const doc = { metadata: { annotations: { [key]: 'v' } } };
    expect(fastJsonPatch.getValueByPointer(doc, `/metadata/annotations/${token}`)).toBe('v');
  });
});
