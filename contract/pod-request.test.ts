import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pod } from '../test/builders/pod.js';
import { ValidationError } from './errors.js';
import { resourceNames } from './names.js';
import { type QuantityPolicy, readPodGpuRequest, requestsGpu, validatePodGpu } from './pod-request.js';

const policy: QuantityPolicy = { names: resourceNames(), memoryUnitMiB: 1 };
const CORE = 'nvidia.com/vcuda-core';
const MEM = 'nvidia.com/vcuda-memory';
const rules = (p: ReturnType<ReturnType<typeof pod>['obj']>, pol = policy) => validatePodGpu(p, pol).map((e) => e.rule);

describe('validatePodGpu: the rule table', () => {
  it.each([
    ['a share with memory', pod().share(30, 8192), []],
    ['one whole card without memory', pod().whole(1), []],
    ['two whole cards with memory per card', pod().container('c', { [CORE]: '200', [MEM]: '81559' }), []],
    ['the smallest share', pod().share(1, 1), []],
    ['the largest share', pod().share(99, 1), []],
    ['150 core', pod().container('c', { [CORE]: '150', [MEM]: '1' }), ['core-share-or-whole']],
    ['0 core', pod().container('c', { [CORE]: '0', [MEM]: '1' }), ['core-positive']],
    ['negative core', pod().container('c', { [CORE]: '-30', [MEM]: '1' }), ['core-positive']],
    ['fractional core', pod().container('c', { [CORE]: '30.5', [MEM]: '1' }), ['whole-number']],
    ['garbage core', pod().container('c', { [CORE]: 'thirty', [MEM]: '1' }), ['whole-number']],
    ['share without memory', pod().container('c', { [CORE]: '30' }), ['share-needs-memory']],
    ['memory without core', pod().container('c', { [MEM]: '1024' }), ['memory-needs-core']],
    ['zero memory', pod().container('c', { [CORE]: '30', [MEM]: '0' }), ['memory-positive']],
    [
      'requests differ from limits',
      pod().container('c', { [CORE]: '30', [MEM]: '1024' }, { [CORE]: '20', [MEM]: '1024' }),
      ['requests-equal-limits'],
    ],
    [
      'requests only (the API server refuses them)',
      pod().container('c', {}, { [CORE]: '30', [MEM]: '1024' }),
      ['limit-required', 'limit-required'],
    ],
    [
      'core in requests, memory in limits',
      pod().container('c', { [MEM]: '1024' }, { [CORE]: '30', [MEM]: '1024' }),
      ['limit-required'],
    ],
    ['memory limit above the request', pod().share(30, 1024).memoryLimit(2048), []],
    ['memory limit equal to the request', pod().share(30, 1024).memoryLimit('1024'), []],
    ['memory limit below the request', pod().share(30, 1024).memoryLimit('512'), ['memory-limit-at-least-request']],
    ['memory limit 0', pod().share(30, 1024).memoryLimit(0), ['memory-positive']],
    ['memory limit not a quantity', pod().share(30, 1024).memoryLimit('lots'), ['whole-number']],
    ['memory limit fractional', pod().share(30, 1024).memoryLimit('1024.5'), ['whole-number']],
    ['soft limit above the request', pod().share(30, 1024).coreLimit(60), []],
    ['limit equal to the request', pod().share(30, 1024).coreLimit(30), []],
    ['limit below the request', pod().share(30, 1024).coreLimit(20), ['core-limit-at-least-request']],
    ['limit above 100', pod().share(30, 1024).coreLimit(101), ['core-limit-range']],
    ['limit 0', pod().share(30, 1024).coreLimit(0), ['core-limit-range']],
    ['limit not a number', pod().share(30, 1024).coreLimit('fast'), ['core-limit-range']],
    ['limit below a whole card', pod().whole(1).coreLimit(50), ['core-limit-at-least-request']],
    ['no GPU at all', pod().container('c', { cpu: '1' }), []],
    ['one whole MIG instance', pod().mig('3g.40gb'), []],
    ['two instances of a media-extension profile', pod().mig('1g.10gb+me', 2), []],
    ['MIG instances and a share in other containers', pod().mig('1g.10gb').share(30, 1024), []],
    ['zero MIG instances', pod().container('c', { 'nvidia.com/mig-3g.40gb': '0' }), ['mig-count-positive']],
    ['a fraction of a MIG instance', pod().container('c', { 'nvidia.com/mig-3g.40gb': '0.5' }), ['whole-number']],
    ['a MIG name that is no profile', pod().container('c', { 'nvidia.com/mig-3g': '1' }), ['mig-profile-name']],
    [
      'MIG requests differ from limits',
      pod().container('c', { 'nvidia.com/mig-3g.40gb': '1' }, { 'nvidia.com/mig-3g.40gb': '2' }),
      ['requests-equal-limits'],
    ],
    [
      'two MIG profiles in one container',
      pod().container('c', { 'nvidia.com/mig-3g.40gb': '1', 'nvidia.com/mig-1g.10gb': '1' }),
      ['one-mig-profile'],
    ],
    [
      'a MIG instance and a share in one container',
      pod().container('c', { 'nvidia.com/mig-3g.40gb': '1', [CORE]: '30', [MEM]: '1024' }),
      ['mig-alone', 'mig-alone'],
    ],
    ['a MIG instance with a core limit below 100 (not applied)', pod().mig('3g.40gb').coreLimit(50), []],
    [
      'init container checked too',
      pod()
        .share(30, 1)
        .init('setup', { [CORE]: '250' }),
      ['core-share-or-whole'],
    ],
  ])('%s', (_name, builder, expected) => {
    expect(rules(builder.obj())).toEqual(expected);
  });

  it('lists every violation of every container, not only the first', () => {
    const p = pod()
      .container('a', { [CORE]: '150', [MEM]: '1' })
      .container('b', { [CORE]: '30' })
      .container('c', { [MEM]: '5' })
      .coreLimit(500)
      .obj();
    const errors = validatePodGpu(p, policy);
    expect(errors.map((e) => e.rule).sort()).toEqual(
      ['core-limit-range', 'core-share-or-whole', 'memory-needs-core', 'share-needs-memory'].sort(),
    );
  });

  it('checks the core limit of a container that has another problem too', () => {
    const p = pod()
      .container('c', { [CORE]: '30', [MEM]: '0.5' })
      .coreLimit(20)
      .obj();
    expect(rules(p).sort()).toEqual(['core-limit-at-least-request', 'whole-number']);
  });

  it('names the field and the rule in the message', () => {
    const [error] = validatePodGpu(
      pod()
        .container('c', { [CORE]: '150', [MEM]: '1' })
        .obj(),
      policy,
    );
    expect(error?.path).toBe('spec.containers[0].resources.limits["nvidia.com/vcuda-core"]');
    expect(error?.message).toBe(
      'spec.containers[0].resources.limits["nvidia.com/vcuda-core"]: 150 is neither below 100 nor a multiple of 100',
    );
  });

  it('works under another resource domain and ignores the default one there', () => {
    const tencent: QuantityPolicy = { names: resourceNames('tencent.com'), memoryUnitMiB: 256 };
    const p = pod('p', 'tencent.com').share(30, 4).obj();
    expect(validatePodGpu(p, tencent)).toEqual([]);
    expect(readPodGpuRequest(p, tencent).containers[0]?.memoryMiBPerCard).toBe(1024);
    expect(requestsGpu(p, resourceNames())).toBe(false);
  });

  it('accepts every share with memory and refuses every non-multiple above 100 (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2000 }), fc.integer({ min: 1, max: 200_000 }), (core, mem) => {
        const errors = rules(
          pod()
            .container('c', { [CORE]: String(core), [MEM]: String(mem) })
            .obj(),
        );
        const valid = core < 100 || core % 100 === 0;
        expect(errors).toEqual(valid ? [] : ['core-share-or-whole']);
      }),
    );
  });
});

describe('readPodGpuRequest', () => {
  it('normalizes shares, whole cards, limits and modes', () => {
    const p = pod()
      .share(30, 8192, 'model')
      .whole(2, 'trainer')
      .init('warm', { [CORE]: '10', [MEM]: '64' })
      .coreLimit(60);
    expect(readPodGpuRequest(p.obj(), policy).containers).toEqual([
      { name: 'warm', isInit: true, corePerCard: 10, cards: 1, memoryMiBPerCard: 64, coreLimit: 60, mode: 'soft' },
      { name: 'model', isInit: false, corePerCard: 30, cards: 1, memoryMiBPerCard: 8192, coreLimit: 60, mode: 'soft' },
      {
        name: 'trainer',
        isInit: false,
        corePerCard: 100,
        cards: 2,
        memoryMiBPerCard: undefined,
        coreLimit: 100,
        mode: 'hard',
      },
    ]);
  });

  it('reads whole MIG instances as their profile and count, held whole and never throttled', () => {
    const p = pod().mig('3g.40gb', 2, 'train').mig('1g.10gb+me', 1, 'media').share(30, 1024, 'side');
    const containers = readPodGpuRequest(p.coreLimit(60).obj(), policy).containers;
    expect(containers).toEqual([
      {
        name: 'train',
        isInit: false,
        corePerCard: 100,
        cards: 2,
        memoryMiBPerCard: undefined,
        coreLimit: 100,
        mode: 'hard',
        mig: '3g.40gb',
      },
      {
        name: 'media',
        isInit: false,
        corePerCard: 100,
        cards: 1,
        memoryMiBPerCard: undefined,
        coreLimit: 100,
        mode: 'hard',
        mig: '1g.10gb+me',
      },
      { name: 'side', isInit: false, corePerCard: 30, cards: 1, memoryMiBPerCard: 1024, coreLimit: 60, mode: 'soft' },
    ]);
    expect(requestsGpu(pod().mig('7g.80gb').obj(), resourceNames())).toBe(true);
    expect(requestsGpu(pod().mig('7g.80gb').obj(), resourceNames('tencent.com'))).toBe(false);
  });

  it('names the MIG field and the rule when a container mixes an instance with a share', () => {
    const errors = validatePodGpu(
      pod()
        .container('c', { 'nvidia.com/mig-3g.40gb': '1', [CORE]: '30', [MEM]: '1024' })
        .obj(),
      policy,
    );
    expect(errors.map((e) => e.message)).toEqual([
      'spec.containers[0].resources.limits["nvidia.com/vcuda-core"]: nvidia.com/vcuda-core beside nvidia.com/mig-3g.40gb: a container takes whole MIG instances or vcuda shares, not both; to share an instance, the node agent names it in mig.shared and containers ask vcuda-core/vcuda-memory',
      'spec.containers[0].resources.limits["nvidia.com/vcuda-memory"]: nvidia.com/vcuda-memory beside nvidia.com/mig-3g.40gb: a container takes whole MIG instances or vcuda shares, not both; to share an instance, the node agent names it in mig.shared and containers ask vcuda-core/vcuda-memory',
    ]);
  });

  it('carries a memory limit above the request as the burst ceiling, in MiB per card', () => {
    const p = pod().share(30, 1024, 'model').share(20, 4096, 'side').memoryLimit('3072');
    const refused = validatePodGpu(p.obj(), { ...policy, memoryUnitMiB: 1 });
    // 3072 is above model's 1024 but below side's 4096: the pod is refused, naming the annotation.
    expect(refused.map((e) => [e.path, e.rule])).toEqual([
      ['metadata.annotations["nvidia.com/vcuda-memory-limit"]', 'memory-limit-at-least-request'],
    ]);
    expect(refused[0]?.message).toContain("3072 is below side's request of 4096");
    const [c] = readPodGpuRequest(pod().share(30, 4, 'model').memoryLimit('8').obj(), {
      ...policy,
      memoryUnitMiB: 256,
    }).containers;
    expect(c).toMatchObject({ memoryMiBPerCard: 1024, memoryLimitMiBPerCard: 2048 });
  });

  it('leaves no burst ceiling without the annotation, at the request, or on a whole card', () => {
    const plain = readPodGpuRequest(pod().share(30, 1024).obj(), policy).containers[0];
    const equal = readPodGpuRequest(pod().share(30, 1024).memoryLimit(1024).obj(), policy).containers[0];
    const whole = readPodGpuRequest(pod().whole(1).memoryLimit(1024).obj(), policy).containers[0];
    for (const c of [plain, equal, whole]) expect(c?.memoryLimitMiBPerCard).toBeUndefined();
  });

  it('defaults to a hard limit equal to the request', () => {
    const [c] = readPodGpuRequest(pod().share(25, 100).obj(), policy).containers;
    expect(c).toMatchObject({ coreLimit: 25, mode: 'hard' });
  });

  it('throws a ValidationError carrying every violation', () => {
    const bad = pod('bad')
      .container('c', { [CORE]: '150' })
      .obj();
    try {
      readPodGpuRequest(bad, policy);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).errors.map((e) => e.rule)).toEqual(['core-share-or-whole']);
      expect((err as ValidationError).message).toContain('pod team-a/bad is invalid');
    }
  });

  it('reads the real API server payloads unchanged', () => {
    // Byte-for-byte copies of the captured payloads live with the webhook's tests.
    const dir = new URL('../webhooks/testdata/kubernetes-1.26/', import.meta.url);
    const share = JSON.parse(readFileSync(new URL('admission-mutate-create-share.json', dir), 'utf8'));
    expect(readPodGpuRequest(share.request.object, policy).containers).toEqual([
      { name: 'model', isInit: false, corePerCard: 30, cards: 1, memoryMiBPerCard: 8192, coreLimit: 60, mode: 'soft' },
    ]);
    const multi = JSON.parse(readFileSync(new URL('admission-mutate-create-multi-container.json', dir), 'utf8'));
    const containers = readPodGpuRequest(multi.request.object, policy).containers;
    expect(containers.map((c) => [c.name, c.corePerCard, c.cards])).toEqual([
      ['train', 100, 2],
      ['sidecar', 10, 1],
    ]);
    const none = JSON.parse(readFileSync(new URL('admission-mutate-create-no-gpu.json', dir), 'utf8'));
    expect(requestsGpu(none.request.object, resourceNames())).toBe(false);
  });
});
