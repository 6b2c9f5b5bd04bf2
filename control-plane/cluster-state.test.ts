import { describe, expect, it } from 'vitest';
import { vcudaAnnotations } from '../contract/index.js';
import { ClusterState } from './cluster-state.js';
import { readPodHold } from './placement/cluster-snapshot.js';
import { assignedPod, cardUuid, gpuNode } from './testing/builders.js';

function cardOf(state: ClusterState, node: string, index: number) {
  return state
    .snapshot()
    .nodes.get(node)
    ?.cards.find((c) => c.uuid === cardUuid(node, index));
}

describe('ClusterState', () => {
  it('derives per-card use from the assignments of pods on the node', () => {
    const s = new ClusterState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]));
    s.upsertPod(assignedPod('b', 'n1', [{ core: 20, memoryMiB: 500, cards: [0] }]));
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 50, usedMemoryMiB: 1500 });
    expect(cardOf(s, 'n1', 1)).toMatchObject({ usedCore: 0, usedMemoryMiB: 0 });
  });

  it('counts pods seen before their node once the node arrives (restart order does not matter)', () => {
    const s = new ClusterState();
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [1] }]));
    s.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    expect(cardOf(s, 'n1', 1)).toMatchObject({ usedCore: 30 });
  });

  it('hands out immutable snapshots: an old snapshot does not change', () => {
    const s = new ClusterState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const before = s.snapshot();
    expect(s.snapshot()).toBe(before);
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]));
    const after = s.snapshot();
    expect(after.version).toBeGreaterThan(before.version);
    expect(before.nodes.get('n1')?.cards[0]?.usedCore).toBe(0);
    expect(after.nodes.get('n1')?.cards[0]?.usedCore).toBe(30);
  });

  it('reports capacity freed when a pod ends, is deleted, or gets allocated', () => {
    const s = new ClusterState();
    const events: string[] = [];
    s.onCapacityFreed((e) => events.push(`${e.node}:${e.why}${e.pod ? `:${e.pod.name}` : ''}`));
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const pending = assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }], { allocated: false });
    s.upsertPod(pending);
    const allocated = structuredClone(pending);
    (allocated.metadata?.annotations as Record<string, string>)[vcudaAnnotations.allocatedAt] = '2026-11-22T04:00:02Z';
    s.upsertPod(allocated);
    s.upsertPod({ ...allocated, status: { phase: 'Succeeded' } });
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(0);
    const other = assignedPod('b', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]);
    s.upsertPod(other);
    s.removePod(other);
    expect(events).toEqual(['n1:pod-allocated:a', 'n1:pod-ended:a', 'n1:pod-ended:b']);
  });

  it("a failed bind rolled back reports no ended pod (its ledger rows may be another bind's)", () => {
    const s = new ClusterState();
    const events: string[] = [];
    s.onCapacityFreed((e) => events.push(`${e.node}:${e.why}`));
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const bare = { metadata: { name: 'p', namespace: 'default', uid: 'uid-p' }, spec: { containers: [] } };
    s.upsertPod(bare);
    const assigned = assignedPod('p', 'n1', [{ core: 40, memoryMiB: 100, cards: [0] }], { allocated: false });
    const hold = readPodHold(assigned);
    if (!hold) throw new Error('no hold');
    s.assumePod(bare, hold);
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(40);
    s.restorePod(bare);
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(0);
    expect(events).toEqual([]);
    // The same rollback through upsertPod frees the capacity but names no pod to release.
    s.assumePod(bare, hold);
    s.upsertPod(bare);
    expect(events).toEqual(['n1:assignment-withdrawn']);
  });

  it('drops a watch event older than the bound copy it holds, so the cards stay taken', () => {
    const s = new ClusterState();
    const events: string[] = [];
    s.onCapacityFreed((e) => events.push(`${e.node}:${e.why}`));
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const bare = { metadata: { name: 'p', namespace: 'default', uid: 'uid-p', resourceVersion: '9' }, spec: {} };
    s.upsertPod(bare);
    const bound = assignedPod('p', 'n1', [{ core: 40, memoryMiB: 100, cards: [0] }]);
    bound.metadata = { ...bound.metadata, resourceVersion: '12' };
    // The binder stores what its patch returned; the watch then delivers an event queued before it.
    s.upsertPod(bound);
    s.upsertPod({ ...bare, metadata: { ...bare.metadata, resourceVersion: '10' } });
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(40);
    expect(events).toEqual([]);
    // A newer copy is taken, and a recreated pod (new uid) is never judged stale.
    s.upsertPod({ ...bound, metadata: { ...bound.metadata, resourceVersion: '13' }, status: { phase: 'Succeeded' } });
    expect(events).toEqual(['n1:pod-ended']);
    s.upsertPod({ ...bound, metadata: { ...bound.metadata, uid: 'uid-p2', resourceVersion: '5' } });
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(40);
  });

  it('tracks pending assignments until the node agent allocates them', () => {
    const s = new ClusterState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }], { allocated: false }));
    expect(s.snapshot().nodes.get('n1')?.pending).toEqual([
      { podUid: 'uid-a', pod: 'default/a', coreAmounts: [30], assignedAtMs: Date.parse('2026-11-22T04:00:00Z') },
    ]);
  });
});
