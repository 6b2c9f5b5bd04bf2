import { describe, expect, it } from 'vitest';
import { assignedPod, buildNodeSnapshot, gpuNode, gpuPod, policy } from '../../test/support/control-plane/builders.js';
import type { ClusterSnapshot } from '../placement/cluster-snapshot.js';
import type { FitContext } from '../placement/fit.js';
import { readPlacementRequest } from '../placement/placement-request.js';
import { coversNodes, filterNodes, prioritizeNodes, summarizeRefusals } from './filter-decision.js';

const ctx: FitContext = { nowMs: Date.parse('2026-11-22T04:00:30Z'), heartbeatStaleMs: 60_000 };

function cluster(): ClusterSnapshot {
  const nodes = new Map([
    ['empty', buildNodeSnapshot(gpuNode({ name: 'empty', cards: 2 }), [])],
    [
      'half',
      buildNodeSnapshot(gpuNode({ name: 'half', cards: 2 }), [
        assignedPod('a', 'half', [{ core: 100, memoryMiB: 81920, cards: [0] }]),
      ]),
    ],
    [
      'full',
      buildNodeSnapshot(gpuNode({ name: 'full', cards: 1 }), [
        assignedPod('b', 'full', [{ core: 90, memoryMiB: 100, cards: [0] }]),
      ]),
    ],
  ]);
  return { version: 7, nodes };
}

describe('filterNodes / prioritizeNodes', () => {
  const req = readPlacementRequest(gpuPod('p', [{ core: 30, memoryMiB: 1024 }]), policy, 'binpack');

  it('keeps feasible nodes in offered order with their scores, and refuses the rest with a reason', () => {
    const out = filterNodes(req, cluster(), ['full', 'empty', 'ghost', 'half'], ctx);
    expect(out.version).toBe(7);
    expect(out.feasible).toEqual(['empty', 'half']);
    expect(out.refused.get('full')?.message).toBe('no card with 30 core free; best has 10');
    expect(out.refused.get('ghost')?.reason).toBe('unknown-node');
    // Binpack: the half-full node scores higher than the empty one.
    const [empty, half] = out.feasibleScores as [number, number];
    expect(half).toBeGreaterThan(empty);
    expect(prioritizeNodes(['empty', 'half'], out)).toEqual([
      { Host: 'empty', Score: empty },
      { Host: 'half', Score: half },
    ]);
    // Another order or a mix with refused nodes: looked up by name, refused ones score 0.
    expect(prioritizeNodes(['full', 'half', 'empty'], out)).toEqual([
      { Host: 'full', Score: 0 },
      { Host: 'half', Score: half },
      { Host: 'empty', Score: empty },
    ]);
  });

  it('says whether an outcome judged every offered node', () => {
    const out = filterNodes(req, cluster(), ['full', 'empty'], ctx);
    expect(coversNodes(out, ['empty'])).toBe(true);
    expect(coversNodes(out, ['full', 'empty'])).toBe(true);
    expect(coversNodes(out, ['empty', 'half'])).toBe(false);
  });

  it('summarizes refusals for the pod event', () => {
    const out = filterNodes(req, cluster(), ['full', 'ghost'], ctx);
    expect(summarizeRefusals(2, out.refused, 1)).toBe(
      '0/2 nodes can hold the pod: full: no card with 30 core free; best has 10; and 1 more',
    );
  });
});
