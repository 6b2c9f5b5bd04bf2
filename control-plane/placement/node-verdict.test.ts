/**
 * judgeNode decides most nodes without building a placement; it must give the same verdict,
 * refusal and score as the full card choice (fitPod, then scoreNode) on every node and pod.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pcieLevels } from '../../contract/index.js';
import {
  assignedPod,
  buildNodeSnapshot,
  type ContainerSpec,
  gpuNode,
  gpuPod,
  policy,
} from '../../test/support/control-plane/builders.js';
import { type FitContext, fitPod } from './fit.js';
import { judgeNode } from './node-verdict.js';
import { readPlacementRequest } from './placement-request.js';
import { scoreNode } from './score.js';

const ctx: FitContext = { nowMs: Date.parse('2026-11-22T04:00:30Z'), heartbeatStaleMs: 60_000 };

// Mostly healthy, often unused cards, so multi-card pods find free sets to choose between.
const card = fc.record({
  healthy: fc.oneof(fc.constant(true), fc.boolean()),
  memoryMiB: fc.constantFrom(16000, 16000, 24000),
  uses: fc.oneof(
    fc.constant<{ core: number; memoryMiB: number; isWhole: boolean }[]>([]),
    fc.array(
      fc.record({
        core: fc.integer({ min: 1, max: 100 }),
        memoryMiB: fc.integer({ min: 0, max: 16000 }),
        isWhole: fc.boolean(),
      }),
      { maxLength: 2 },
    ),
  ),
});
const share = fc.record({ core: fc.integer({ min: 1, max: 99 }), memoryMiB: fc.integer({ min: 1, max: 20000 }) });
const whole = fc.oneof(
  fc.record({ core: fc.constantFrom(100, 200, 300) }),
  fc.record({ core: fc.constant(100), memoryMiB: fc.integer({ min: 1, max: 30000 }) }),
);
const containers: fc.Arbitrary<ContainerSpec[]> = fc.oneof(
  fc.tuple(fc.oneof(share, whole)).map((t) => [...t]),
  fc.tuple(share, fc.oneof(share, whole), fc.boolean()).map(([a, b, init]) => [a, { ...b, name: 'second', init }]),
);

describe('judgeNode', () => {
  it.each(['binpack', 'spread'] as const)('agrees with fitPod + scoreNode (%s)', (placement) => {
    fc.assert(
      fc.property(
        fc.array(card, { minLength: 1, maxLength: 5 }),
        containers,
        fc.integer(),
        fc.boolean(),
        (cards0, asks, seed, isUniform) => {
          // Nodes of one card type are the common case the shortcut serves.
          const cards = isUniform ? cards0.map((c) => ({ ...c, memoryMiB: 16000 })) : cards0;
          // Links vary per pair (symmetric), so multi-card scores depend on which cards are free.
          const linkOf = (i: number, j: number) => {
            const h = (seed ^ (Math.min(i, j) * 7 + Math.max(i, j) * 13)) >>> 0;
            return {
              nvlinks: h % 3 === 0 ? h % 5 : 0,
              pcie: pcieLevels[h % pcieLevels.length] as (typeof pcieLevels)[number],
            };
          };
          const node = gpuNode({
            name: 'n',
            cards: cards.map((c) => ({ healthy: c.healthy, memoryMiB: c.memoryMiB })),
            link: linkOf,
          });
          const pods = cards.flatMap((c, i) =>
            c.uses.map((u, k) =>
              assignedPod(
                `u${i}-${k}`,
                'n',
                [u.isWhole ? { core: 100, memoryMiB: c.memoryMiB, cards: [i] } : { ...u, cards: [i] }],
                { unsigned: true },
              ),
            ),
          );
          const snap = buildNodeSnapshot(node, pods);
          const req = readPlacementRequest(
            gpuPod('p', asks, { annotations: { 'nvidia.com/vcuda-placement': placement } }),
            policy,
            'binpack',
          );
          const full = fitPod(req, snap, ctx);
          const judged = judgeNode(req, snap, ctx);
          if (full.ok) expect(judged).toEqual({ ok: true, score: scoreNode(snap, full.placement, req.policy) });
          else expect(judged).toEqual(full);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('refuses an unknown node and scores an empty one', () => {
    const req = readPlacementRequest(gpuPod('p', [{ core: 50, memoryMiB: 8000 }]), policy, 'spread');
    expect(judgeNode(req, undefined, ctx)).toMatchObject({ ok: false, refusal: { reason: 'unknown-node' } });
    const empty = buildNodeSnapshot(gpuNode({ name: 'n', cards: 2, card: { memoryMiB: 16000 } }), []);
    // Spread: 1 - mean(50/200, 8000/32000) = 0.75 -> 8 of 10.
    expect(judgeNode(req, empty, ctx)).toEqual({ ok: true, score: 8 });
  });
});
