/** The DRA probe's pure half: API objects as the API server returns them, to the facts judged. */
import type { ResourceV1ResourceClaim, V1Pod, V1ResourceSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { asksClass, sliceFactsOf, unallocatedClaimsOf } from './dra-probe.js';

const DRIVER = 'gpu.vcuda.io';

const slice = (node: string, driver: string, shareable: boolean[]): V1ResourceSlice => ({
  metadata: { name: `${node}-${driver}` },
  spec: {
    driver,
    nodeName: node,
    pool: { name: node, generation: 1, resourceSliceCount: 1 },
    devices: shareable.map((s, i) => ({ name: `gpu-${i}`, ...(s ? { allowMultipleAllocations: true } : {}) })),
  },
});

const claim = (name: string, deviceClassName: string, allocated = false, alternatives = false) =>
  ({
    metadata: { name, namespace: 'ml', creationTimestamp: new Date('2026-03-01T11:00:00Z') },
    spec: {
      devices: {
        requests: [
          alternatives
            ? { name: 'gpu', firstAvailable: [{ name: 'a', deviceClassName }] }
            : { name: 'gpu', exactly: { deviceClassName } },
        ],
      },
    },
    ...(allocated ? { status: { allocation: { devices: { results: [] } } } } : {}),
  }) as unknown as ResourceV1ResourceClaim;

const pod = (name: string, extra: { claim?: string; generated?: string; nodeName?: string }): V1Pod => ({
  metadata: { name, namespace: 'ml' },
  spec: {
    containers: [{ name: 'c' }],
    ...(extra.nodeName ? { nodeName: extra.nodeName } : {}),
    ...(extra.claim ? { resourceClaims: [{ name: 'gpu', resourceClaimName: extra.claim }] } : {}),
  },
  status: {
    phase: 'Pending',
    conditions: [
      {
        type: 'PodScheduled',
        status: 'False',
        reason: 'Unschedulable',
        message: '0/1 nodes are available: 1 cannot allocate all claims.',
      },
    ],
    ...(extra.generated ? { resourceClaimStatuses: [{ name: 'gpu', resourceClaimName: extra.generated }] } : {}),
  },
});

describe('sliceFactsOf', () => {
  it("sums a node's devices of the driver and those stored shareable, ignoring other drivers", () => {
    expect(
      sliceFactsOf(
        [slice('n2', DRIVER, [true]), slice('n1', DRIVER, [true, false]), slice('n1', 'other.io', [true])],
        DRIVER,
      ),
    ).toEqual([
      { node: 'n1', devices: 2, shareable: 1 },
      { node: 'n2', devices: 1, shareable: 1 },
    ]);
  });
});

describe('unallocatedClaimsOf', () => {
  it('keeps unallocated claims of the class with the unscheduled pods that reference them', () => {
    const claims = [
      claim('named', DRIVER),
      claim('from-template', DRIVER, false, true),
      claim('done', DRIVER, true),
      claim('elsewhere', 'other.io'),
    ];
    const pods = [
      pod('p1', { claim: 'named' }),
      pod('p2', { generated: 'from-template' }),
      pod('placed', { claim: 'named', nodeName: 'n1' }),
    ];
    expect(unallocatedClaimsOf(claims, pods, DRIVER)).toEqual([
      {
        namespace: 'ml',
        name: 'from-template',
        createdAt: '2026-03-01T11:00:00.000Z',
        waitingPods: [
          { name: 'p2', reason: 'Unschedulable', message: '0/1 nodes are available: 1 cannot allocate all claims.' },
        ],
      },
      {
        namespace: 'ml',
        name: 'named',
        createdAt: '2026-03-01T11:00:00.000Z',
        waitingPods: [expect.objectContaining({ name: 'p1', reason: 'Unschedulable' })],
      },
    ]);
  });

  it('reads a claim as asking the class exactly or among its alternatives only', () => {
    expect(asksClass(claim('a', DRIVER), DRIVER)).toBe(true);
    expect(asksClass(claim('b', DRIVER, false, true), DRIVER)).toBe(true);
    expect(asksClass(claim('c', 'other.io'), DRIVER)).toBe(false);
  });
});
