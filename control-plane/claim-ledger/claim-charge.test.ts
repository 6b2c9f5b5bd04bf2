import { describe, expect, it } from 'vitest';
import type { DraAllocationResult, DraClaim } from '../../contract/index.js';
import { decideClaimCharge } from './claim-charge.js';

const DRIVER = 'gpu.vcuda.io';

function claim(results?: Partial<DraAllocationResult>[], uid = 'u-1'): DraClaim {
  const base = { request: 'gpu', driver: DRIVER, pool: 'node-1', device: 'gpu-0' };
  return {
    metadata: { name: 'share', namespace: 'ml', uid },
    ...(results ? { status: { allocation: { devices: { results: results.map((r) => ({ ...base, ...r })) } } } } : {}),
  };
}

describe('what one write of a claim means for the ledger', () => {
  it('charges the shares an allocation of this driver consumes, memory rounded up to MiB', () => {
    const after = claim([
      { shareID: 's-1', consumedCapacity: { cores: '30', memory: '8Gi' } },
      { request: 'b', device: 'gpu-3', shareID: 's-2', consumedCapacity: { cores: '5', memory: '8000M' } },
    ]);
    expect(decideClaimCharge(claim(), after, DRIVER)).toEqual({
      kind: 'charge',
      claim: { uid: 'u-1', namespace: 'ml', name: 'share' },
      node: 'node-1',
      shares: [
        { key: 'gpu/s-1', cardIndex: 0, core: 30, memoryMiB: 8192 },
        // 8000M is 7629.39 MiB: the ledger never charges less than was consumed.
        { key: 'b/s-2', cardIndex: 3, core: 5, memoryMiB: 7630 },
      ],
      partitions: [],
    });
  });

  it('charges a whole card when the result states no consumed capacity', () => {
    const decision = decideClaimCharge(undefined, claim([{ device: 'gpu-2' }]), DRIVER);
    expect(decision).toMatchObject({
      kind: 'charge',
      shares: [{ key: 'gpu/gpu-2', cardIndex: 2, core: 100, memoryMiB: 'card' }],
    });
  });

  it('releases when the allocation is cleared or the claim deleted, and only then', () => {
    const allocated = claim([{ shareID: 's', consumedCapacity: { cores: '30', memory: '1Gi' } }]);
    expect(decideClaimCharge(allocated, claim(), DRIVER)).toEqual({ kind: 'release', claimUid: 'u-1' });
    expect(decideClaimCharge(allocated, undefined, DRIVER)).toEqual({ kind: 'release', claimUid: 'u-1' });
    expect(decideClaimCharge(claim(), undefined, DRIVER)).toEqual({ kind: 'none' });
    // A driver's status.devices write keeps the allocation as it was.
    expect(decideClaimCharge(allocated, allocated, DRIVER)).toEqual({ kind: 'none' });
  });

  it('leaves claims of other drivers alone', () => {
    const other = claim([{ driver: 'gpu.nvidia.com', device: 'gpu-0' }]);
    expect(decideClaimCharge(claim(), other, DRIVER)).toEqual({ kind: 'none' });
    expect(decideClaimCharge(other, undefined, DRIVER)).toEqual({ kind: 'none' });
  });

  it('charges MIG partitions whole, named by device, and releases them like shares', () => {
    const whole = claim([{ device: 'gpu-0-mig-3g-40gb-4' }, { request: 'b', device: 'gpu-1-mig-1g-10gb-me-6' }]);
    expect(decideClaimCharge(claim(), whole, DRIVER)).toEqual({
      kind: 'charge',
      claim: { uid: 'u-1', namespace: 'ml', name: 'share' },
      node: 'node-1',
      shares: [],
      partitions: [
        { key: 'gpu/gpu-0-mig-3g-40gb-4', device: 'gpu-0-mig-3g-40gb-4' },
        { key: 'b/gpu-1-mig-1g-10gb-me-6', device: 'gpu-1-mig-1g-10gb-me-6' },
      ],
    });
    expect(decideClaimCharge(whole, undefined, DRIVER)).toEqual({ kind: 'release', claimUid: 'u-1' });
    expect(decideClaimCharge(whole, claim(), DRIVER)).toEqual({ kind: 'release', claimUid: 'u-1' });
  });

  it('refuses a claim mixing partitions and card shares, in the words Prepare would refuse it with', () => {
    const mixed = claim([
      { device: 'gpu-1-mig-1g-10gb-me-6' },
      { device: 'gpu-2', shareID: 's', consumedCapacity: { cores: '30', memory: '1Gi' } },
    ]);
    expect(decideClaimCharge(claim(), mixed, DRIVER)).toEqual({
      kind: 'refuse',
      message: 'resourceclaim ml/share: it mixes whole MIG instances and card shares; ask them in separate claims',
    });
  });

  it('refuses what it cannot charge exactly, naming why', () => {
    const cases: [Partial<DraAllocationResult>[], RegExp][] = [
      [[{ device: 'card0' }], /device "card0" is not a card of this driver/],
      [[{ consumedCapacity: { cores: '150' } }], /consumedCapacity.cores 150 is not 1..100/],
      [[{ consumedCapacity: { cores: '30', memory: 'lots' } }], /consumedCapacity.memory lots is not a quantity/],
      [[{ shareID: 'a' }, { pool: 'node-2', shareID: 'b' }], /span pools node-1, node-2/],
    ];
    for (const [results, message] of cases) {
      const decision = decideClaimCharge(undefined, claim(results), DRIVER);
      expect(decision.kind).toBe('refuse');
      expect(decision.kind === 'refuse' && decision.message).toMatch(message);
    }
  });
});
