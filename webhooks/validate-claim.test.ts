import { describe, expect, it } from 'vitest';
import { measureClaimQuotaUsage } from './quota-precheck.js';
import { type ClaimSpecLike, type DeviceConfigLike, type ExactRequestLike, readClaimSpec } from './validate-claim.js';

const policy = { deviceClassName: 'gpu.vcuda.io', driverName: 'gpu.vcuda.io' };
const GI = 1024 ** 3;

function exactly(requests: Record<string, string | number> | undefined, more: ExactRequestLike = {}): ExactRequestLike {
  return { deviceClassName: 'gpu.vcuda.io', ...(requests ? { capacity: { requests } } : {}), ...more };
}

function claim(request: ExactRequestLike, config: DeviceConfigLike[] = []): ClaimSpecLike {
  return { devices: { requests: [{ name: 'gpu', exactly: request }], config } };
}

function vcudaConfig(parameters: unknown, requests?: string[]): DeviceConfigLike {
  return { ...(requests ? { requests } : {}), opaque: { driver: 'gpu.vcuda.io', parameters } };
}

function rulesOf(spec: ClaimSpecLike, prefix = 'spec'): { path: string; rule: string }[] {
  const r = readClaimSpec(spec, prefix, policy);
  return r.kind === 'refused' ? r.errors.map(({ path, rule }) => ({ path, rule })) : [];
}

const EXACT = 'spec.devices.requests[0].exactly';
const cap = (key: string) => `${EXACT}.capacity.requests["${key}"]`;
const PARAMS = 'spec.devices.config[0].opaque.parameters';

describe('readClaimSpec', () => {
  it('reads a share with its memory and soft limit', () => {
    const r = readClaimSpec(
      claim(exactly({ cores: '30', memory: '8Gi' }), [vcudaConfig({ coreLimit: 60 })]),
      'spec',
      policy,
    );
    expect(r).toEqual({
      kind: 'ok',
      requests: [{ name: 'gpu', parent: 'gpu', cores: 30, memoryBytes: 8 * GI, count: 1 }],
      alternativesOutsideClass: new Set(),
    });
  });

  it('leaves claims of other classes and drivers alone, however odd', () => {
    const other: ClaimSpecLike = {
      devices: {
        requests: [
          { name: 'nic', exactly: { deviceClassName: 'nic.example.com', capacity: { requests: { cores: '-1' } } } },
        ],
        config: [{ opaque: { driver: 'nic.example.com', parameters: { coreLimit: 'x' } } }],
      },
    };
    expect(readClaimSpec(other, 'spec', policy)).toEqual({ kind: 'not-vcuda' });
    expect(readClaimSpec({}, 'spec', policy)).toEqual({ kind: 'not-vcuda' });
  });

  it.each([
    ['cores 0', { cores: '0', memory: '1Gi' }, [{ path: cap('cores'), rule: 'cores-range' }]],
    ['cores 101', { cores: '101', memory: '1Gi' }, [{ path: cap('cores'), rule: 'cores-range' }]],
    ['cores 1k', { cores: '1k' }, [{ path: cap('cores'), rule: 'cores-range' }]],
    ['cores 30.5', { cores: '30.5', memory: '1Gi' }, [{ path: cap('cores'), rule: 'whole-number' }]],
    ['cores 300m', { cores: '300m', memory: '1Gi' }, [{ path: cap('cores'), rule: 'whole-number' }]],
    ['cores thirty', { cores: 'thirty', memory: '1Gi' }, [{ path: cap('cores'), rule: 'whole-number' }]],
    ['a share without memory', { cores: '30' }, [{ path: cap('memory'), rule: 'share-needs-memory' }]],
    ['memory without cores', { memory: '8Gi' }, [{ path: cap('memory'), rule: 'memory-needs-cores' }]],
    ['memory 0', { cores: '30', memory: '0' }, [{ path: cap('memory'), rule: 'memory-positive' }]],
    ['memory 0.5', { cores: '30', memory: '0.5' }, [{ path: cap('memory'), rule: 'whole-number' }]],
    [
      'another capacity',
      { cores: '30', memory: '1Gi', bandwidth: '10' },
      [{ path: cap('bandwidth'), rule: 'capacity-unknown' }],
    ],
  ])('refuses %s', (_name, requests, want) => {
    expect(rulesOf(claim(exactly(requests)))).toEqual(want);
  });

  it.each([
    ['the whole card', { cores: '100' }],
    ['the whole card with a stated memory', { cores: '100', memory: '40Gi' }],
    ['1 core', { cores: 1, memory: '1Mi' }],
  ])('admits %s', (_name, requests) => {
    expect(readClaimSpec(claim(exactly(requests)), 'spec', policy).kind).toBe('ok');
  });

  it('allows count and All only for whole cards', () => {
    expect(rulesOf(claim(exactly(undefined, { count: 2 })))).toEqual([]);
    expect(rulesOf(claim(exactly({ cores: '100' }, { count: 4 })))).toEqual([]);
    expect(rulesOf(claim(exactly(undefined, { allocationMode: 'All' })))).toEqual([]);
    expect(rulesOf(claim(exactly({ cores: '30', memory: '1Gi' }, { count: 2 })))).toEqual([
      { path: `${EXACT}.count`, rule: 'count-needs-whole-cards' },
    ]);
    expect(rulesOf(claim(exactly({ cores: '30', memory: '1Gi' }, { allocationMode: 'All' })))).toEqual([
      { path: `${EXACT}.allocationMode`, rule: 'count-needs-whole-cards' },
    ]);
  });

  it.each([
    [
      'a limit below the share',
      { coreLimit: 20 },
      [{ path: `${PARAMS}.coreLimit`, rule: 'core-limit-at-least-request' }],
    ],
    ['a limit of 0', { coreLimit: 0 }, [{ path: `${PARAMS}.coreLimit`, rule: 'too_small' }]],
    ['a limit of 101', { coreLimit: 101 }, [{ path: `${PARAMS}.coreLimit`, rule: 'too_big' }]],
    ['a fractional limit', { coreLimit: 40.5 }, [{ path: `${PARAMS}.coreLimit`, rule: 'invalid_type' }]],
    ['a limit as text', { coreLimit: '60' }, [{ path: `${PARAMS}.coreLimit`, rule: 'invalid_type' }]],
    ['no limit', {}, [{ path: `${PARAMS}.coreLimit`, rule: 'invalid_type' }]],
    ['an unknown field', { coreLimit: 60, burst: true }, [{ path: PARAMS, rule: 'unrecognized_keys' }]],
    ['another kind', { kind: 'GpuConfig', coreLimit: 60 }, [{ path: `${PARAMS}.kind`, rule: 'invalid_value' }]],
    ['no parameters', undefined, [{ path: PARAMS, rule: 'invalid_type' }]],
  ])('refuses an opaque config with %s', (_name, parameters, want) => {
    expect(rulesOf(claim(exactly({ cores: '30', memory: '1Gi' }), [vcudaConfig(parameters)]))).toEqual(want);
  });

  it('checks the limit against the requests the config applies to', () => {
    const spec: ClaimSpecLike = {
      devices: {
        requests: [
          { name: 'small', exactly: exactly({ cores: '10', memory: '1Gi' }) },
          { name: 'big', exactly: exactly({ cores: '70', memory: '1Gi' }) },
          { name: 'whole', exactly: exactly(undefined) },
        ],
        config: [vcudaConfig({ coreLimit: 50 }, ['small']), vcudaConfig({ coreLimit: 50 }, ['big'])],
      },
    };
    expect(rulesOf(spec)).toEqual([
      { path: 'spec.devices.config[1].opaque.parameters.coreLimit', rule: 'core-limit-at-least-request' },
    ]);
    spec.devices?.config?.push(vcudaConfig({ coreLimit: 80 }));
    expect(rulesOf(spec).map((e) => e.path)).toEqual([
      'spec.devices.config[1].opaque.parameters.coreLimit',
      'spec.devices.config[2].opaque.parameters.coreLimit',
    ]);
  });

  it('judges each firstAvailable alternative of the class, under the template prefix', () => {
    const spec: ClaimSpecLike = {
      devices: {
        requests: [
          {
            name: 'gpu',
            firstAvailable: [
              { name: 'big', ...exactly({ cores: '150', memory: '4Gi' }) },
              { name: 'small', ...exactly({ cores: '20' }) },
              { name: 'mig', deviceClassName: 'mig.nvidia.com', capacity: { requests: { cores: '500' } } },
            ],
          },
        ],
        config: [vcudaConfig({ coreLimit: 30 }, ['gpu/small'])],
      },
    };
    expect(rulesOf(spec, 'spec.spec')).toEqual([
      { path: 'spec.spec.devices.requests[0].firstAvailable[0].capacity.requests["cores"]', rule: 'cores-range' },
      {
        path: 'spec.spec.devices.requests[0].firstAvailable[1].capacity.requests["memory"]',
        rule: 'share-needs-memory',
      },
    ]);
  });

  it('lists every problem of a claim, each once', () => {
    const spec = claim(exactly({ cores: '30' }, { count: 2 }), [vcudaConfig({ coreLimit: 10, burst: true })]);
    expect(rulesOf(spec)).toEqual([
      { path: PARAMS, rule: 'unrecognized_keys' },
      { path: `${EXACT}.capacity.requests["memory"]`, rule: 'share-needs-memory' },
      { path: `${EXACT}.count`, rule: 'count-needs-whole-cards' },
    ]);
  });

  it('judges a config for the driver even when no request names the class', () => {
    const spec: ClaimSpecLike = {
      devices: {
        requests: [{ name: 'x', exactly: { deviceClassName: 'other' } }],
        config: [vcudaConfig({ coreLimit: 0 })],
      },
    };
    expect(rulesOf(spec)).toEqual([{ path: `${PARAMS}.coreLimit`, rule: 'too_small' }]);
  });
});

describe('measureClaimQuotaUsage', () => {
  function usage(spec: ClaimSpecLike) {
    const r = readClaimSpec(spec, 'spec', policy);
    if (r.kind !== 'ok') throw new Error(`not ok: ${JSON.stringify(r)}`);
    return measureClaimQuotaUsage(r.requests, r.alternativesOutsideClass);
  }

  it('sums shares and whole cards, memory rounded up to MiB', () => {
    const spec: ClaimSpecLike = {
      devices: {
        requests: [
          { name: 'a', exactly: exactly({ cores: '30', memory: '8000M' }) },
          { name: 'b', exactly: exactly(undefined, { count: 2 }) },
        ],
      },
    };
    expect(usage(spec)).toEqual({
      core: 230,
      shareCore: 0,
      memoryMiB: Math.ceil(8e9 / 2 ** 20),
      hasUncountedMemory: true,
    });
  });

  it('counts a firstAvailable request at the least of its alternatives, and not at all beside another class', () => {
    const alternatives = [
      { name: 'big', ...exactly({ cores: '60', memory: '1Gi' }) },
      { name: 'small', ...exactly({ cores: '20', memory: '4Gi' }) },
    ];
    expect(usage({ devices: { requests: [{ name: 'gpu', firstAvailable: alternatives }] } })).toEqual({
      core: 20,
      shareCore: 0,
      memoryMiB: 1024,
      hasUncountedMemory: false,
    });
    const withOther = [...alternatives, { name: 'cpu', deviceClassName: 'cpu.example.com' }];
    expect(usage({ devices: { requests: [{ name: 'gpu', firstAvailable: withOther }] } })).toEqual({
      core: 0,
      shareCore: 0,
      memoryMiB: 0,
      hasUncountedMemory: false,
    });
  });
});
