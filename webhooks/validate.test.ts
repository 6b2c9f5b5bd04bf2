import { describe, expect, it } from 'vitest';
import { type PodLike, resourceNames } from '../contract/index.js';
import { pod } from '../test/builders/pod.js';
import { type AdmissionPolicy, validateCreate, validateGpuPod, validateUpdate } from './validate.js';

const names = resourceNames();
const CONTROL_PLANE = 'system:serviceaccount:vcuda-system:vcuda-control-plane';
const policy: AdmissionPolicy = {
  quantity: { names, memoryUnitMiB: 1 },
  privilegedUsernames: new Set([CONTROL_PLANE]),
};

const rulesOf = (errors: { path: string; rule: string }[]) => errors.map((e) => `${e.path} ${e.rule}`);
const core = (v: string) => ({ [names.core]: v });
const share = (c: string, m: string) => ({ [names.core]: c, [names.memory]: m });

// The whole rule table: each row is a pod and the exact violations it must produce.
const table: Record<string, { pod: PodLike; want: string[] }> = {
  'a 30 share with memory': { pod: pod().share(30, 8192).obj(), want: [] },
  'two whole cards, no memory': { pod: pod().whole(2).obj(), want: [] },
  'soft limit above the request': { pod: pod().share(30, 1024).coreLimit(60).obj(), want: [] },
  'limit of 100 on a share': { pod: pod().share(1, 1).coreLimit(100).obj(), want: [] },
  'quantities with suffixes': { pod: pod().container('c', share('30', '8Ki')).obj(), want: [] },
  'core 150': {
    pod: pod().container('c', core('150')).obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-core"] core-share-or-whole'],
  },
  'core 0': {
    pod: pod().container('c', share('0', '10')).obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-core"] core-positive'],
  },
  'core negative': {
    pod: pod().container('c', share('-30', '10')).obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-core"] core-positive'],
  },
  'core fraction': {
    pod: pod().container('c', share('30.5', '10')).obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-core"] whole-number'],
  },
  'core not a quantity': {
    pod: pod().container('c', share('thirty', '10')).obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-core"] whole-number'],
  },
  'share without memory': {
    pod: pod().container('c', core('30')).obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-memory"] share-needs-memory'],
  },
  'memory without core': {
    pod: pod()
      .container('c', { [names.memory]: '1024' })
      .obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-memory"] memory-needs-core'],
  },
  'memory zero': {
    pod: pod().container('c', share('30', '0')).obj(),
    want: ['spec.containers[0].resources.limits["nvidia.com/vcuda-memory"] memory-positive'],
  },
  'requests differ from limits': {
    pod: pod().container('c', share('30', '1024'), share('20', '1024')).obj(),
    want: ['spec.containers[0].resources.requests["nvidia.com/vcuda-core"] requests-equal-limits'],
  },
  'limit below the request': {
    pod: pod().share(30, 1024).coreLimit(20).obj(),
    want: ['metadata.annotations["nvidia.com/vcuda-core-limit"] core-limit-at-least-request'],
  },
  'memory limit above the request': { pod: pod().share(30, 1024).memoryLimit('2048').obj(), want: [] },
  'memory limit below the request': {
    pod: pod().share(30, 1024).memoryLimit('512').obj(),
    want: ['metadata.annotations["nvidia.com/vcuda-memory-limit"] memory-limit-at-least-request'],
  },
  'memory limit not a quantity': {
    pod: pod().share(30, 1024).memoryLimit('more').obj(),
    want: ['metadata.annotations["nvidia.com/vcuda-memory-limit"] whole-number'],
  },
  'limit above 100': {
    pod: pod().share(30, 1024).coreLimit(101).obj(),
    want: ['metadata.annotations["nvidia.com/vcuda-core-limit"] core-limit-range'],
  },
  'limit not a number': {
    pod: pod().share(30, 1024).coreLimit('lots').obj(),
    want: ['metadata.annotations["nvidia.com/vcuda-core-limit"] core-limit-range'],
  },
  'init container checked too': {
    pod: pod().init('warm', core('250')).share(30, 1024).obj(),
    want: ['spec.initContainers[0].resources.limits["nvidia.com/vcuda-core"] core-share-or-whole'],
  },
  'nodeName preset': {
    pod: pod().share(30, 1024).onNode('gpu-node-b').obj(),
    want: ['spec.nodeName node-name-preset'],
  },
  'placement must be binpack or spread': {
    pod: pod().share(30, 1024).annotate(names.placement, 'random').obj(),
    want: ['metadata.annotations["nvidia.com/vcuda-placement"] placement-policy'],
  },
  'single-numa must be a boolean': {
    pod: pod().whole(2).annotate(names.singleNuma, 'yes').obj(),
    want: ['metadata.annotations["nvidia.com/vcuda-single-numa"] boolean'],
  },
  'every violation at once': {
    pod: pod()
      .init('warm', core('150'))
      .container('a', core('30'))
      .container('b', { [names.memory]: '5' })
      .annotate(names.placement, 'x')
      .onNode('n')
      .obj(),
    want: [
      'metadata.annotations["nvidia.com/vcuda-placement"] placement-policy',
      'spec.containers[0].resources.limits["nvidia.com/vcuda-memory"] share-needs-memory',
      'spec.containers[1].resources.limits["nvidia.com/vcuda-memory"] memory-needs-core',
      'spec.initContainers[0].resources.limits["nvidia.com/vcuda-core"] core-share-or-whole',
      'spec.nodeName node-name-preset',
    ],
  },
};

describe('validateGpuPod: the rule table', () => {
  it.each(Object.entries(table))('%s', (_name, { pod: p, want }) => {
    expect(rulesOf(validateGpuPod(p, policy))).toEqual(want);
  });

  it('every message names its field', () => {
    for (const { pod: p } of Object.values(table)) {
      for (const e of validateGpuPod(p, policy)) expect(e.message.startsWith(e.path)).toBe(true);
    }
  });
});

describe('validateCreate (after mutation)', () => {
  it('refuses a vcuda.io annotation added after the mutating hook', () => {
    const p = pod().share(30, 1024).annotate('vcuda.io/assignment', 'x').obj();
    expect(rulesOf(validateCreate(p, policy))).toEqual([
      'metadata.annotations["vcuda.io/assignment"] vcuda-annotation-reserved',
    ]);
  });

  it('refuses a vcuda.io label other than vcuda.io/gpu, which the mutating hook sets', () => {
    const p = pod().share(30, 1024).obj() as PodLike & { metadata: { labels?: Record<string, string> } };
    p.metadata.labels = { 'vcuda.io/gpu': 'true', 'vcuda.io/tier': 'gold', app: 'x' };
    expect(rulesOf(validateCreate(p, policy))).toEqual(['metadata.labels["vcuda.io/tier"] vcuda-annotation-reserved']);
  });

  it('ignores pods without vcuda resources entirely', () => {
    const p = pod().container('c', { cpu: '1' }).annotate('vcuda.io/assignment', 'x').onNode('n').obj();
    expect(validateCreate(p, policy)).toEqual([]);
  });
});

describe('validateUpdate', () => {
  const bound = pod('p').share(30, 1024).coreLimit(30).annotate('vcuda.io/assignment', 'jws').onNode('n').obj();
  const withAnnotations = (extra: Record<string, string | undefined>) => {
    const next = structuredClone(bound);
    const a = next.metadata?.annotations as Record<string, string>;
    for (const [k, v] of Object.entries(extra)) {
      if (v === undefined) delete a[k];
      else a[k] = v;
    }
    return next;
  };

  it.each([
    [
      'adds',
      { 'vcuda.io/allocated-at': 'now' },
      'metadata.annotations["vcuda.io/allocated-at"] vcuda-annotation-reserved',
    ],
    [
      'changes',
      { 'vcuda.io/assignment': 'other' },
      'metadata.annotations["vcuda.io/assignment"] vcuda-annotation-reserved',
    ],
    [
      'removes',
      { 'vcuda.io/assignment': undefined },
      'metadata.annotations["vcuda.io/assignment"] vcuda-annotation-reserved',
    ],
  ])('refuses a user who %s a vcuda.io annotation', (_verb, extra, want) => {
    const errors = validateUpdate(withAnnotations(extra), bound, 'alice', policy);
    expect(rulesOf(errors)).toEqual([want]);
    expect(errors[0]?.message).toContain('"alice"');
  });

  it('lets the control plane write vcuda.io annotations', () => {
    const next = withAnnotations({ 'vcuda.io/assignment': 'new', 'vcuda.io/assigned-at': 't' });
    expect(validateUpdate(next, bound, CONTROL_PLANE, policy)).toEqual([]);
  });

  it('refuses an unknown user (no userInfo) touching vcuda.io annotations', () => {
    expect(validateUpdate(withAnnotations({ 'vcuda.io/x': '1' }), bound, undefined, policy)).toHaveLength(1);
  });

  it('allows unrelated annotation changes by anyone', () => {
    expect(validateUpdate(withAnnotations({ note: 'hello' }), bound, 'alice', policy)).toEqual([]);
  });

  it('freezes the knobs the pod was admitted with, even for privileged users', () => {
    const next = withAnnotations({ [names.coreLimit]: '90', [names.memoryLimit]: '4096', [names.placement]: 'spread' });
    expect(rulesOf(validateUpdate(next, bound, CONTROL_PLANE, policy))).toEqual([
      'metadata.annotations["nvidia.com/vcuda-core-limit"] immutable-after-create',
      'metadata.annotations["nvidia.com/vcuda-memory-limit"] immutable-after-create',
      'metadata.annotations["nvidia.com/vcuda-placement"] immutable-after-create',
    ]);
  });

  it('ignores updates of pods that never asked for vcuda resources', () => {
    const plain = pod().container('c', { cpu: '1' }).obj();
    const next = structuredClone(plain);
    (next.metadata as { annotations: Record<string, string> }).annotations['vcuda.io/assignment'] = 'x';
    expect(validateUpdate(next, plain, 'alice', policy)).toEqual([]);
  });
});
