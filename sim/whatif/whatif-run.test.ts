import { describe, expect, it } from 'vitest';
import { resourceNames } from '../../contract/index.js';
import { parseClusterSpec } from '../cluster-spec.js';
import { expandWorkload, parseWorkloadSpec } from '../traces/workload-spec.js';
import { runWhatIf } from './whatif-run.js';

const names = resourceNames();
const cluster = (nodes: number, cards: number, quotas = {}) =>
  parseClusterSpec({ nodes: [{ namePrefix: 'n', count: nodes, cards, memoryMiB: 81920 }], quotas });
const trace = (pods: unknown[]) => expandWorkload(parseWorkloadSpec({ pods }), names);
const run = (c: ReturnType<typeof cluster>, pods: unknown[], policy: 'binpack' | 'spread' = 'binpack') =>
  runWhatIf(c, trace(pods), { policy, quantity: { names, memoryUnitMiB: 1 } });

describe('what-if capacity planning', () => {
  it('places shares until the cards are full and says why the rest stayed out', () => {
    const r = run(cluster(1, 2), [{ name: 'half', count: 5, core: 50, memory: 40960 }]);
    expect(r).toMatchObject({
      pods: 5,
      placed: 4,
      unplaced: 1,
      quotaRefused: 0,
      invalid: 0,
      coreUsed: 200,
      memoryUsedMiB: 163840,
    });
    expect(r.placementRate).toBeCloseTo(0.8);
    expect(Object.keys(r.unplacedReasons)).toHaveLength(1);
  });

  it('refuses past a namespace quota and counts invalid requests apart', () => {
    const r = run(cluster(1, 4, { 'team-a': { core: 100, memoryMiB: 1_000_000 } }), [
      { name: 'a', namespace: 'team-a', count: 3, core: 50, memory: 1024 },
      { name: 'bad', count: 2, core: 150 },
    ]);
    expect(r).toMatchObject({ placed: 2, quotaRefused: 1, invalid: 2, placementRate: 1 });
    expect(r.invalidExamples[0]).toContain('neither below 100 nor a multiple of 100');
  });

  it('measures stranded capacity: core left without memory, memory left without core', () => {
    const memHog = run(cluster(1, 1), [
      { name: 'hog', core: 10, memory: 81920 - 512 },
      { name: 'small', core: 10, memory: 1024 },
    ]);
    expect(memHog.placed).toBe(1);
    expect(memHog.strandedCore).toBe(90);
    const coreHog = run(cluster(1, 1), [
      { name: 'hog', core: 95, memory: 1024 },
      { name: 'small', core: 10, memory: 1024 },
    ]);
    expect(coreHog.strandedMemoryMiB).toBe(81920 - 1024);
  });

  it('binpacks or spreads with the extender score', () => {
    const pods = [{ name: 's', count: 2, core: 30, memory: 1024 }];
    const packed = run(cluster(2, 1), pods, 'binpack');
    expect(new Set(Object.values(packed.placements)).size).toBe(1);
    const spread = run(cluster(2, 1), pods, 'spread');
    expect(new Set(Object.values(spread.placements)).size).toBe(2);
  });

  it('gives cards back when a pod of the trace ends', () => {
    const pods = [
      { name: 'first', core: 100, durationSeconds: 10 },
      { name: 'second', core: 100, arriveAtSeconds: 20 },
    ];
    expect(run(cluster(1, 1), pods).placed).toBe(2);
    expect(
      run(cluster(1, 1), [
        { name: 'first', core: 100 },
        { name: 'second', core: 100, arriveAtSeconds: 20 },
      ]).placed,
    ).toBe(1);
  });

  it('names the field and rule of a bad cluster description', () => {
    expect(() => parseClusterSpec({ nodes: [{ cards: 99 }] })).toThrow(/nodes\[0\]\.cards/);
    expect(() => parseClusterSpec({ nodes: [{ name: 'a' }, { name: 'a' }] })).toThrow(/appears twice/);
  });
});
