import { describe, expect, it } from 'vitest';
import type { LedgerHolder } from './allocation/ports.js';
import type { UsageSample } from './usage.js';
import { shareSamples, splitByWeights } from './usage.js';

const MiB = 2 ** 20;

describe('splitByWeights', () => {
  it.each([
    [100, [1, 1, 1], [34, 33, 33]],
    [5, [30, 10], [4, 1]],
    [1, [30, 10], [1, 0]],
    [0, [30, 10], [0, 0]],
    [7, [0, 0], [0, 0]],
    [1000, [3], [1000]],
  ])('%i by %j is %j, summing to the whole', (total, weights, parts) => {
    expect(splitByWeights(total, weights)).toEqual(parts);
  });
});

describe('shareSamples', () => {
  // A claim with two shares on GPU-a (30 and 10 cores, 3 and 1 GiB) and one on GPU-b.
  const claim: LedgerHolder = {
    id: 'claim:u-train',
    name: 'train',
    shares: [
      { key: 'gpu/s1', cardUuid: 'GPU-a', cores: 30, memoryBytes: 3072 * MiB },
      { key: 'gpu/s2', cardUuid: 'GPU-a', cores: 10, memoryBytes: 1024 * MiB },
      { key: 'big/s3', cardUuid: 'GPU-b', cores: 50, memoryBytes: 8192 * MiB },
    ],
  };
  // The claim's budget on GPU-a as collectUsage reads it: 40 cores under a soft limit of 60.
  const onCardA: UsageSample = {
    podUid: 'pod-uid',
    namespace: 'ml',
    pod: 'trainer',
    container: 'train',
    cardUuid: 'GPU-a',
    memoryUsedBytes: 2000 * MiB + 3,
    memoryLimitBytes: 4096 * MiB,
    memoryBurstBytes: 0,
    memoryBurstEvictedBytes: 0,
    memoryBurstEvictions: 0,
    coreRequest: 40,
    coreLimit: 60,
    smShare: 0.3333,
  };

  it('bills each share of the card under the claim, its part by cores and memory, summing to what was measured', () => {
    const out = shareSamples(onCardA, claim);
    expect(out.map((s) => [s.podUid, s.pod, s.namespace, s.container, s.cardUuid])).toEqual([
      ['claim:u-train', 'train', 'ml', 'gpu/s1', 'GPU-a'],
      ['claim:u-train', 'train', 'ml', 'gpu/s2', 'GPU-a'],
    ]);
    expect(out.map((s) => [s.smShare, s.coreRequest, s.coreLimit, s.memoryLimitBytes])).toEqual([
      [0.25, 30, 45, 3072 * MiB],
      [0.0833, 10, 15, 1024 * MiB],
    ]);
    expect(out.reduce((sum, s) => sum + (s.smShare ?? 0) * 10_000, 0)).toBeCloseTo(3333, 6);
    expect(out.reduce((sum, s) => sum + s.memoryUsedBytes, 0)).toBe(onCardA.memoryUsedBytes);
  });

  it('keeps an unmeasured card unmeasured, a measured idle one at 0, and bills no share elsewhere', () => {
    expect(shareSamples({ ...onCardA, smShare: null }, claim).map((s) => s.smShare)).toEqual([null, null]);
    expect(shareSamples({ ...onCardA, smShare: 0 }, claim).map((s) => s.smShare)).toEqual([0, 0]);
    expect(shareSamples({ ...onCardA, cardUuid: 'GPU-c' }, claim)).toEqual([]);
  });

  it('never sends a share below what the control plane takes as a measurement (0 or a basis point)', () => {
    const tiny = shareSamples({ ...onCardA, smShare: 0.0001 }, claim).map((s) => s.smShare);
    expect(tiny).toEqual([0.0001, 0]);
  });
});
