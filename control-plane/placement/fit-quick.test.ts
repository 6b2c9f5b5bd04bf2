/**
 * fitPod answers most refusals from the node's free summary without walking its cards. That
 * shortcut must agree with the full walk: same verdict, same reason, same message.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assignedPod, buildNodeSnapshot, gpuNode, gpuPod, policy } from '../../test/support/control-plane/builders.js';
import { type FitContext, fitPod } from './fit.js';
import { readPlacementRequest } from './placement-request.js';

const ctx: FitContext = { nowMs: Date.parse('2026-11-22T04:00:30Z'), heartbeatStaleMs: 60_000 };

describe('fitPod shortcut', () => {
  it('agrees with the full card walk', () => {
    const card = fc.record({
      healthy: fc.boolean(),
      uses: fc.array(
        fc.record({ core: fc.integer({ min: 1, max: 60 }), memoryMiB: fc.integer({ min: 0, max: 9000 }) }),
        {
          maxLength: 2,
        },
      ),
    });
    const ask = fc.oneof(
      fc.record({ core: fc.integer({ min: 1, max: 99 }), memoryMiB: fc.integer({ min: 1, max: 16000 }) }),
      fc.record({ core: fc.constantFrom(100, 200, 300) }),
    );
    fc.assert(
      fc.property(fc.array(card, { minLength: 1, maxLength: 4 }), ask, (cards, want) => {
        const node = gpuNode({ name: 'n', cards: cards.map((c) => ({ healthy: c.healthy, memoryMiB: 16000 })) });
        const pods = cards.flatMap((c, i) =>
          c.uses.map((u, k) =>
            assignedPod(`u${i}-${k}`, 'n', [{ core: u.core, memoryMiB: u.memoryMiB, cards: [i] }], { unsigned: true }),
          ),
        );
        const snap = buildNodeSnapshot(node, pods);
        const plain = readPlacementRequest(gpuPod('p', [want]), policy, 'binpack');
        // A UUID exclusion that matches nothing turns the shortcut off without changing the cards.
        const walked = readPlacementRequest(
          gpuPod('p', [want], { annotations: { 'nvidia.com/vcuda-gpu-uuid-exclude': 'GPU-00000000' } }),
          policy,
          'binpack',
        );
        const a = fitPod(plain, snap, ctx);
        const b = fitPod(walked, snap, ctx);
        expect(a.ok).toBe(b.ok);
        if (!a.ok && !b.ok) expect(a.refusal).toEqual(b.refusal);
      }),
      { numRuns: 300 },
    );
  });
});
