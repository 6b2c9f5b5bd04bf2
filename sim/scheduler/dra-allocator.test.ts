import { describe, expect, it } from 'vitest';
import { allocateClaim, nodeCandidates } from './dra-allocator.js';
import type { AllocationResult, ClaimSpec, DeviceClass, ResourceSlice, SliceDevice } from './dra-objects.js';

const DRIVER = 'gpu.vcuda.io';

function card(name: string, memory: string, uuid = name, shared = true): SliceDevice {
  return {
    name,
    ...(shared ? { allowMultipleAllocations: true } : {}),
    attributes: { uuid: { string: uuid } },
    capacity: {
      cores: { value: '100', requestPolicy: { default: '100', validRange: { min: '1', max: '100', step: '1' } } },
      memory: {
        value: memory,
        requestPolicy: { default: memory, validRange: { min: '1Mi', max: memory, step: '1Mi' } },
      },
    },
  };
}

function slice(node: string, devices: SliceDevice[], generation = 1, name = `${node}-slice`, count = 1): ResourceSlice {
  return {
    metadata: { name },
    spec: { driver: DRIVER, nodeName: node, pool: { name: node, generation, resourceSliceCount: count }, devices },
  };
}

const CLASSES = new Map<string, DeviceClass>([
  [
    DRIVER,
    { metadata: { name: DRIVER }, spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] } },
  ],
  ['other', { metadata: { name: 'other' }, spec: { selectors: [{ cel: { expression: 'device.driver == "x.io"' } }] } }],
  [
    'fancy',
    { metadata: { name: 'fancy' }, spec: { selectors: [{ cel: { expression: 'device.attributes["a"].b > 1' } }] } },
  ],
]);

function share(cores: string, memory?: string, extra: Record<string, unknown> = {}): ClaimSpec {
  const requests: Record<string, string> = { cores, ...(memory ? { memory } : {}) };
  return {
    devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: DRIVER, capacity: { requests }, ...extra } }] },
  };
}

let ids = 0;
function allocate(
  spec: ClaimSpec,
  allocated: AllocationResult[] = [],
  slices = [slice('node-a', [card('gpu-0', '24Gi'), card('gpu-1', '40Gi')])],
) {
  return allocateClaim({
    node: 'node-a',
    slices,
    classes: CLASSES,
    allocated,
    claim: { spec },
    newShareId: () => `share-${++ids}`,
  });
}

describe('DRA allocator', () => {
  it('takes the first card that fits, rounding memory up to the step as kube-scheduler does', () => {
    const out = allocate(share('30', '8000M'));
    expect(out).toMatchObject({
      ok: true,
      results: [
        {
          request: 'gpu',
          driver: DRIVER,
          pool: 'node-a',
          device: 'gpu-0',
          consumedCapacity: { cores: '30', memory: '7630Mi' },
        },
      ],
    });
    expect(out.ok && out.results[0]!.shareID).toMatch(/^share-/);
  });

  it('charges an unrequested capacity at its default (here the whole memory)', () => {
    const out = allocate(share('30'));
    expect(out).toMatchObject({
      ok: true,
      results: [{ device: 'gpu-0', consumedCapacity: { cores: '30', memory: '24Gi' } }],
    });
  });

  it('puts a fourth 30 % share on the second card once the first holds three', () => {
    let allocated: AllocationResult[] = [];
    const devices: string[] = [];
    for (let i = 0; i < 4; i++) {
      const out = allocate(share('30', '8Gi'), allocated);
      if (!out.ok) throw new Error(out.reason);
      allocated = [...allocated, ...out.results];
      devices.push(out.results[0]!.device);
    }
    expect(devices).toEqual(['gpu-0', 'gpu-0', 'gpu-0', 'gpu-1']);
  });

  it('gives count: 2 two different cards, and refuses it with one card', () => {
    const out = allocate(share('10', '1Gi', { count: 2 }));
    expect(out.ok && out.results.map((r) => r.device)).toEqual(['gpu-0', 'gpu-1']);
    const one = allocate(share('10', '1Gi', { count: 2 }), [], [slice('node-a', [card('gpu-0', '24Gi')])]);
    expect(one.ok).toBe(false);
  });

  it('lets two requests share a card unless distinctAttribute says otherwise', () => {
    const exactly = { deviceClassName: DRIVER, capacity: { requests: { cores: '10', memory: '1Gi' } } };
    const requests = [
      { name: 'a', exactly },
      { name: 'b', exactly },
    ];
    const same = allocate({ devices: { requests } });
    expect(same.ok && same.results.map((r) => r.device)).toEqual(['gpu-0', 'gpu-0']);
    const distinct = allocate({
      devices: { requests, constraints: [{ requests: ['a', 'b'], distinctAttribute: `${DRIVER}/uuid` }] },
    });
    expect(distinct.ok && distinct.results.map((r) => r.device)).toEqual(['gpu-0', 'gpu-1']);
    const matched = allocate({ devices: { requests, constraints: [{ matchAttribute: `${DRIVER}/uuid` }] } });
    expect(matched.ok && matched.results.map((r) => r.device)).toEqual(['gpu-0', 'gpu-0']);
  });

  it.each([
    ['memory beyond every card', share('30', '64Gi'), /memory/],
    ['cores above the valid range', share('150', '1Gi'), /requestPolicy/],
    ['a capacity no card has', share('30', '1Gi', { capacity: { requests: { 'tensor-cores': '1' } } }), /tensor-cores/],
  ])('refuses %s with a reason', (_what, spec, reason) => {
    const out = allocate(spec);
    expect(out).toEqual({ ok: false, reason: expect.stringMatching(reason) });
  });

  it('refuses a class it cannot evaluate, naming the selector', () => {
    const out = allocate({ devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: 'fancy' } }] } });
    expect(out).toEqual({
      ok: false,
      refused: true,
      reason: expect.stringMatching(/DeviceClass fancy: CEL selector .* not supported/),
    });
    const missing = allocate({ devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: 'nope' } }] } });
    expect(missing).toEqual({
      ok: false,
      refused: true,
      reason: expect.stringMatching(/device class nope does not exist/),
    });
    const other = allocate({ devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: 'other' } }] } });
    expect(other).toMatchObject({ ok: false, reason: expect.stringMatching(/no matching device/) });
    expect(other).not.toHaveProperty('refused');
  });

  it('takes an exclusive device only once, and whole', () => {
    const slices = [slice('node-a', [card('gpu-0', '24Gi', 'u0', false)])];
    const first = allocate(share('30', '8Gi'), [], slices);
    expect(first).toMatchObject({ ok: true, results: [{ device: 'gpu-0' }] });
    expect(first.ok && first.results[0]!.consumedCapacity).toBeUndefined();
    expect(allocate(share('30', '8Gi'), first.ok ? first.results : [], slices).ok).toBe(false);
  });

  it('reads only the newest generation of a complete pool on the node', () => {
    const old = slice('node-a', [card('old', '24Gi')], 1, 'a-old');
    const fresh = slice('node-a', [card('new', '24Gi')], 2, 'a-new');
    const partial = slice('node-a', [card('half', '24Gi')], 1, 'b', 2);
    partial.spec.pool.name = 'other-pool';
    const elsewhere = slice('node-b', [card('b0', '24Gi')]);
    expect(nodeCandidates('node-a', [old, fresh, partial, elsewhere]).map((c) => c.device.name)).toEqual(['new']);
  });
});
