import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cardUuid, gpuNode, gpuPod, policy } from '../../test/support/control-plane/builders.js';
import { composeNodeSnapshot, readNodeInventory } from './cluster-snapshot.js';
import { type FitContext, fitPod } from './fit.js';
import type { CardHold } from './holds/index.js';
import { readPlacementRequest } from './placement-request.js';
import { chooseVictims, type PreemptionInput, type VictimCandidate } from './preemption.js';

const ctx: FitContext = { nowMs: Date.parse('2026-11-22T04:00:30Z'), heartbeatStaleMs: 60_000 };
const NODE = 'n';

function hold(uses: Record<number, { core: number; memoryMiB: number }>): CardHold {
  const cardUse = new Map(Object.entries(uses).map(([i, u]) => [cardUuid(NODE, Number(i)), u]));
  return { kind: 'pod-assignment', node: NODE, cardUse };
}

type PodSpec = { name: string; card: number; core: number; memoryMiB?: number; priority?: number; pdb?: boolean };

function candidate(p: PodSpec, startMs = 0): VictimCandidate {
  return {
    uid: `uid-${p.name}`,
    pod: `default/${p.name}`,
    priority: p.priority ?? 0,
    violatesPdb: p.pdb ?? false,
    startMs,
    hold: hold({ [p.card]: { core: p.core, memoryMiB: p.memoryMiB ?? 1024 } }),
  };
}

function input(
  cards: number,
  pods: PodSpec[],
  ask: { core: number; memoryMiB?: number },
  preemptorPriority = 1000,
): PreemptionInput {
  return {
    node: readNodeInventory(gpuNode({ name: NODE, cards, card: { memoryMiB: 16384 } })),
    kept: [],
    candidates: pods.map((p, i) => candidate(p, i)),
    preemptorPriority,
    request: readPlacementRequest(gpuPod('p', [ask]), policy, 'binpack'),
    ctx,
  };
}

const names = (r: ReturnType<typeof chooseVictims>) =>
  r.ok ? r.victims.map((v) => v.pod.replace('default/', '')).sort() : r.reason;

describe('chooseVictims', () => {
  it('takes the two pods of one card for a whole card, not two from different cards', () => {
    const pods = Array.from({ length: 16 }, (_, i) => ({ name: `low${i}`, card: i % 8, core: 50 }));
    const r = chooseVictims(input(8, pods, { core: 100 }));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.victims).toHaveLength(2);
    expect(new Set(r.victims.map((v) => [...v.hold.cardUse.keys()][0])).size).toBe(1);
  });

  it.each([
    {
      name: 'a 60-core share: one 60-core pod rather than three 20s on three cards',
      pods: [
        { name: 'a', card: 0, core: 20 },
        { name: 'b', card: 0, core: 80 },
        { name: 'c', card: 1, core: 40 },
        { name: 'd', card: 1, core: 60 },
      ],
      ask: { core: 60, memoryMiB: 1024 },
      victims: ['d'],
    },
    {
      name: 'never a pod of equal or higher priority',
      pods: [
        { name: 'eq', card: 0, core: 100, priority: 1000 },
        { name: 'hi', card: 1, core: 100, priority: 2000 },
        { name: 'lo1', card: 2, core: 50 },
        { name: 'lo2', card: 2, core: 50 },
      ],
      ask: { core: 100 },
      victims: ['lo1', 'lo2'],
    },
    {
      name: 'refuses a node where only equal-priority pods could make room',
      pods: [
        { name: 'eq', card: 0, core: 100, priority: 1000 },
        { name: 'lo', card: 1, core: 50 },
        { name: 'hi', card: 1, core: 50, priority: 5000 },
      ],
      ask: { core: 100 },
      victims: 'evicting every lower-priority pod (1) would not make room: needs 1 entirely free card; 0 free',
    },
    {
      name: 'prefers the card whose eviction violates no PodDisruptionBudget',
      pods: [
        { name: 'guarded', card: 0, core: 100, pdb: true },
        { name: 'free1', card: 1, core: 60 },
        { name: 'free2', card: 1, core: 40 },
      ],
      ask: { core: 100 },
      victims: ['free1', 'free2'],
    },
    {
      name: 'prefers the card whose highest victim priority is lowest',
      pods: [
        { name: 'mid', card: 0, core: 100, priority: 500 },
        { name: 'low1', card: 1, core: 50, priority: 10 },
        { name: 'low2', card: 1, core: 50, priority: 10 },
      ],
      ask: { core: 100 },
      victims: ['low1', 'low2'],
    },
    {
      name: 'memory counts: the pod holding the memory goes, not the one holding core',
      pods: [
        { name: 'core-heavy', card: 0, core: 60, memoryMiB: 1024 },
        { name: 'mem-heavy', card: 0, core: 10, memoryMiB: 14000 },
      ],
      ask: { core: 20, memoryMiB: 8000 },
      victims: ['mem-heavy'],
    },
    {
      name: 'two whole cards: two cards emptied, nothing more',
      pods: [
        { name: 'a', card: 0, core: 100 },
        { name: 'b', card: 1, core: 30 },
        { name: 'c', card: 2, core: 100 },
      ],
      ask: { core: 200 },
      // Three pairs would do; the oldest pod (a) is the one given back first, as kube-scheduler does.
      victims: ['b', 'c'],
    },
    {
      name: 'no victims when it already fits',
      pods: [{ name: 'a', card: 0, core: 50 }],
      ask: { core: 50, memoryMiB: 1024 },
      victims: [],
    },
  ])('$name', ({ pods, ask, victims }) => {
    const cards = Math.max(...pods.map((p) => p.card)) + 1;
    expect(names(chooseVictims(input(cards, pods, ask)))).toEqual(victims);
  });

  it('keeps the more important of two equal choices', () => {
    // Both cards hold one pod; the older-started equal one is reprieved, as kube-scheduler does.
    const pods = [
      { name: 'old', card: 0, core: 100 },
      { name: 'new', card: 1, core: 100 },
    ];
    expect(names(chooseVictims(input(2, pods, { core: 100 })))).toEqual(['new']);
  });

  it('after the victims go the pod fits, and no smaller part of them would do', () => {
    const pod = fc.record({
      card: fc.integer({ min: 0, max: 3 }),
      core: fc.integer({ min: 1, max: 60 }),
      memoryMiB: fc.integer({ min: 0, max: 9000 }),
      priority: fc.integer({ min: 0, max: 3 }),
      pdb: fc.boolean(),
    });
    const ask = fc.oneof(
      fc.record({ core: fc.integer({ min: 1, max: 99 }), memoryMiB: fc.integer({ min: 1, max: 16000 }) }),
      fc.record({ core: fc.constantFrom(100, 200) }),
    );
    fc.assert(
      fc.property(fc.array(pod, { maxLength: 8 }), ask, (specs, want) => {
        const pods = specs.map((s, i) => ({ ...s, name: `p${i}` }));
        const inp = input(4, pods, want, 2);
        const r = chooseVictims(inp);
        if (!r.ok) {
          const lowerGone = inp.candidates.filter((c) => c.priority >= 2).map((c) => c.hold);
          expect(fitPod(inp.request, composeNodeSnapshot(inp.node, lowerGone), ctx).ok).toBe(false);
          return;
        }
        for (const v of r.victims) expect(v.priority).toBeLessThan(2);
        const fitsWithout = (gone: readonly VictimCandidate[]) => {
          const holds = inp.candidates.filter((c) => !gone.includes(c)).map((c) => c.hold);
          return fitPod(inp.request, composeNodeSnapshot(inp.node, holds), ctx).ok;
        };
        expect(fitsWithout(r.victims)).toBe(true);
        // Every strict subset: none suffices.
        const n = r.victims.length;
        for (let mask = 0; mask < (1 << n) - 1; mask++) {
          expect(fitsWithout(r.victims.filter((_, i) => mask & (1 << i)))).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });
});
