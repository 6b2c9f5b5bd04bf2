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

  describe('with priorities', () => {
    const classes = [
      { name: 'low', value: 0 },
      { name: 'high', value: 1000 },
      { name: 'polite', value: 1000, preemptionPolicy: 'Never' },
    ];
    const runWith = (pods: unknown[], c = cluster(1, 8)) => {
      const spec = parseWorkloadSpec({ pods, priorityClasses: classes });
      return runWhatIf(c, expandWorkload(spec, names), {
        policy: 'binpack',
        quantity: { names, memoryUnitMiB: 1 },
        priorityClasses: spec.priorityClasses,
      });
    };
    // Sixteen half-card pods fill the node's 8 cards, two per card; the youngest arrive last.
    const full = { name: 'low', count: 16, core: 50, memory: 1024, intervalSeconds: 1, priorityClassName: 'low' };

    it('a high-priority whole-card pod on a full cluster evicts exactly the two pods of one card', () => {
      const r = runWith([
        full,
        { name: 'urgent', core: 100, memory: 1024, arriveAtSeconds: 60, priorityClassName: 'high' },
      ]);
      expect(r).toMatchObject({ placed: 17, unplaced: 0, preemptions: 1, victims: 2 });
      // The youngest two shared the last card filled; giving back the older ones first spares them.
      expect(r.preempted).toEqual({
        'default/low-14': { by: 'default/urgent', node: 'n-0' },
        'default/low-15': { by: 'default/urgent', node: 'n-0' },
      });
      expect(r.placements['default/urgent']).toBe('n-0');
      // 14 shares of 50 and one whole card: nothing over 100 on any card, 800 in all.
      expect(r.coreUsed).toBe(800);
    });

    it('never preempts for a pod whose class says Never, nor for an equal priority', () => {
      const polite = runWith([full, { name: 'p', core: 100, arriveAtSeconds: 60, priorityClassName: 'polite' }]);
      expect(polite).toMatchObject({ placed: 16, unplaced: 1, preemptions: 0, victims: 0, preempted: {} });
      const equal = runWith([full, { name: 'e', core: 100, arriveAtSeconds: 60, priorityClassName: 'low' }]);
      expect(equal).toMatchObject({ placed: 16, unplaced: 1, victims: 0 });
    });

    it('evicts for a preemptor past its quota, whose bind the quota then refuses, as in the cluster', () => {
      const c = cluster(1, 1, { tight: { core: 50, memoryMiB: 100_000 } });
      const r = runWith(
        [
          { name: 'a', core: 50, memory: 1024, priorityClassName: 'low' },
          { name: 'b', core: 50, memory: 1024, priorityClassName: 'low' },
          { name: 'big', namespace: 'tight', core: 100, memory: 1024, arriveAtSeconds: 5, priorityClassName: 'high' },
        ],
        c,
      );
      // Preemption does not look at quota; the bind does: the victims are gone and the pod stays out.
      expect(r).toMatchObject({ placed: 2, quotaRefused: 1, preemptions: 0, victims: 2 });
      expect(Object.values(r.preempted).map((p) => p.by)).toEqual(['tight/big', 'tight/big']);
      expect(r.coreUsed).toBe(0);
    });

    it('counts a pod naming an undeclared class as invalid, as admission refuses it', () => {
      const r = runWith([{ name: 'x', core: 10, memory: 1024, priorityClassName: 'gold' }]);
      expect(r.invalid).toBe(1);
      expect(r.invalidExamples[0]).toContain('no PriorityClass with name gold');
    });
  });
});
