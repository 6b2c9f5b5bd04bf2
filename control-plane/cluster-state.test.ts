import { describe, expect, it } from 'vitest';
import { type Assignment, peekAssignment, vcudaAnnotations } from '../contract/index.js';
import {
  assignedPod,
  assignmentFor,
  cardUuid,
  forgedPlainPod,
  gpuNode,
  gpuPod,
  testState,
} from '../test/support/control-plane/builders.js';
import type { ClusterState } from './cluster-state.js';
import { holdOfAssignment } from './placement/holds/index.js';

function cardOf(state: ClusterState, node: string, index: number) {
  return state
    .snapshot()
    .nodes.get(node)
    ?.cards.find((c) => c.uuid === cardUuid(node, index));
}

describe('ClusterState', () => {
  it('derives per-card use from the assignments of pods on the node', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]));
    s.upsertPod(assignedPod('b', 'n1', [{ core: 20, memoryMiB: 500, cards: [0] }]));
    await s.settled();
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 50, usedMemoryMiB: 1500 });
    expect(cardOf(s, 'n1', 1)).toMatchObject({ usedCore: 0, usedMemoryMiB: 0 });
  });

  it('counts pods seen before their node once the node arrives (restart order does not matter)', async () => {
    const s = testState();
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [1] }]));
    await s.settled();
    s.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    expect(cardOf(s, 'n1', 1)).toMatchObject({ usedCore: 30 });
  });

  it('hands out immutable snapshots: an old snapshot does not change', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const before = s.snapshot();
    expect(s.snapshot()).toBe(before);
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]));
    await s.settled();
    const after = s.snapshot();
    expect(after.version).toBeGreaterThan(before.version);
    expect(before.nodes.get('n1')?.cards[0]?.usedCore).toBe(0);
    expect(after.nodes.get('n1')?.cards[0]?.usedCore).toBe(30);
  });

  it('keeps every old snapshot as it was through many changes, node additions and removals', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    s.upsertNode(gpuNode({ name: 'n2', cards: 1 }));
    const first = s.snapshot();
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]));
    await s.settled();
    const second = s.snapshot();
    s.upsertNode(gpuNode({ name: 'n3', cards: 1 }));
    s.removeNode('n2');
    s.upsertPod(assignedPod('b', 'n1', [{ core: 20, memoryMiB: 500, cards: [0] }]));
    await s.settled();
    const third = s.snapshot();
    const used = (snap: typeof first) =>
      [...snap.nodes.values()].map((n) => `${n.name}:${n.cards[0]?.usedCore}`).sort();
    expect(used(first)).toEqual(['n1:0', 'n2:0']);
    expect(used(second)).toEqual(['n1:30', 'n2:0']);
    expect(used(third)).toEqual(['n1:50', 'n3:0']);
    expect([first.nodes.size, second.nodes.size, third.nodes.size]).toEqual([2, 2, 2]);
    expect(first.nodes.get('n3')).toBeUndefined();
    expect(second.nodes.has('n2')).toBe(true);
    expect(third.nodes.has('n2')).toBe(false);
    expect(first.nodes.get('n1')?.cards[0]?.usedCore).toBe(0);
  });

  it('leaves the snapshot alone when a pod update changes nothing it holds', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const pod = assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]);
    s.upsertPod(pod);
    await s.settled();
    const before = s.snapshot();
    // A status update, as the watch reports many: same assignment, same cards.
    s.upsertPod({ ...pod, status: { phase: 'Running' } });
    expect(s.snapshot()).toBe(before);
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 30 });
    s.upsertPod({ ...pod, status: { phase: 'Succeeded' } });
    expect(s.snapshot()).not.toBe(before);
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 0 });
  });

  it('leaves the snapshot alone when a Node update changes nothing the agent publishes, and follows what it does', () => {
    const s = testState();
    const node = gpuNode({ name: 'n1', cards: 2 });
    const published = node.metadata?.annotations?.[vcudaAnnotations.inventory] ?? '{}';
    // The node as the API server has it: the agent's two annotations, and whatever else is on it.
    const nodeWith = (inventory: string, heartbeat: string, more: { labels?: Record<string, string> } = {}) => ({
      ...node,
      metadata: {
        ...node.metadata,
        ...more,
        annotations: { [vcudaAnnotations.inventory]: inventory, [vcudaAnnotations.heartbeat]: heartbeat },
      },
    });
    s.upsertNode(nodeWith(published, '2026-11-22T04:00:00.000Z'));
    const before = s.snapshot();
    const heartbeatBefore = before.nodes.get('n1')?.heartbeatMs ?? 0;
    // The kubelet's status, a label: a new object, the same annotations.
    s.upsertNode(nodeWith(published, '2026-11-22T04:00:00.000Z', { labels: { zone: 'b' } }));
    expect(s.snapshot()).toBe(before);
    // A later heartbeat is read: the node's snapshot carries it.
    s.upsertNode(nodeWith(published, '2026-11-22T05:00:00.000Z'));
    expect(s.snapshot()).not.toBe(before);
    expect(s.snapshot().nodes.get('n1')?.heartbeatMs).toBeGreaterThan(heartbeatBefore);
    // A changed inventory is read: a card gone unhealthy is no longer offered as healthy.
    const inventory = JSON.parse(published);
    inventory.cards[1].healthy = false;
    const afterHeartbeat = s.snapshot();
    s.upsertNode(nodeWith(JSON.stringify(inventory), '2026-11-22T05:00:00.000Z'));
    expect(s.snapshot()).not.toBe(afterHeartbeat);
    expect(cardOf(s, 'n1', 1)?.healthy).toBe(false);
    // Removed and added again with the same annotations: read again, not skipped as seen.
    s.removeNode('n1');
    expect(s.snapshot().nodes.get('n1')).toBeUndefined();
    s.upsertNode(nodeWith(JSON.stringify(inventory), '2026-11-22T05:00:00.000Z'));
    expect(cardOf(s, 'n1', 1)?.healthy).toBe(false);
  });

  it('checks a held assignment against the spec again when what the pod asks changes (a resize)', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const pod = assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]);
    s.upsertPod(pod);
    await s.settled();
    // The same token on a copy that asks other core: the grant no longer agrees, so nothing is held.
    const asksMore = assignedPod('a', 'n1', [{ core: 40, memoryMiB: 1000, cards: [0] }]);
    s.upsertPod({ ...asksMore, metadata: pod.metadata, status: { phase: 'Running' } });
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 0 });
    // Back to what it was granted: held again.
    s.upsertPod({ ...pod, status: { phase: 'Running' } });
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 30 });
  });

  it("holds a bind's own signed assignment at once, and never brings back a pod deleted meanwhile", () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const pod = assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]);
    const token = pod.metadata?.annotations?.[vcudaAnnotations.assignment] as string;
    const assignment = peekAssignment(token) as Assignment;
    const unassigned = { ...pod, metadata: { ...pod.metadata, annotations: {} } };
    s.upsertPod(unassigned);
    s.recordSigned(unassigned, token, assignment);
    // No verification to wait for: the binder signed it (upsertPod would otherwise hold nothing yet).
    s.upsertPod(pod);
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 30 });
    expect(s.heldAssignment('default', 'a')).toEqual(assignment);
    s.removePod(pod);
    s.recordSigned(unassigned, token, assignment);
    expect(s.pod('default', 'a')).toBeUndefined();
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 0 });
  });

  it('reports capacity freed when a pod ends, is deleted, or gets allocated', async () => {
    const s = testState();
    const events: string[] = [];
    s.onCapacityFreed((e) => events.push(`${e.node}:${e.why}${e.pod ? `:${e.pod.name}` : ''}`));
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const pending = assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }], { allocated: false });
    s.upsertPod(pending);
    await s.settled();
    const allocated = structuredClone(pending);
    (allocated.metadata?.annotations as Record<string, string>)[vcudaAnnotations.allocatedAt] = '2026-11-22T04:00:02Z';
    s.upsertPod(allocated);
    s.upsertPod({ ...allocated, status: { phase: 'Succeeded' } });
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(0);
    const other = assignedPod('b', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]);
    s.upsertPod(other);
    await s.settled();
    s.removePod(other);
    expect(events).toEqual(['n1:pod-allocated:a', 'n1:pod-ended:a', 'n1:pod-ended:b']);
  });

  it("a failed bind rolled back reports no ended pod (its ledger rows may be another bind's)", () => {
    const s = testState();
    const events: string[] = [];
    s.onCapacityFreed((e) => events.push(`${e.node}:${e.why}`));
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const bare = { metadata: { name: 'p', namespace: 'default', uid: 'uid-p' }, spec: { containers: [] } };
    s.upsertPod(bare);
    const hold = holdOfAssignment(
      assignmentFor({ uid: 'uid-p', namespace: 'default', name: 'p' }, 'n1', [
        { core: 40, memoryMiB: 100, cards: [0] },
      ]),
      {},
    );
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

  it('drops a watch event older than the bound copy it holds, so the cards stay taken', async () => {
    const s = testState();
    const events: string[] = [];
    s.onCapacityFreed((e) => events.push(`${e.node}:${e.why}`));
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const bare = { metadata: { name: 'p', namespace: 'default', uid: 'uid-p', resourceVersion: '9' }, spec: {} };
    s.upsertPod(bare);
    const bound = assignedPod('p', 'n1', [{ core: 40, memoryMiB: 100, cards: [0] }]);
    bound.metadata = { ...bound.metadata, resourceVersion: '12' };
    // The binder stores what its patch returned; the watch then delivers an event queued before it.
    s.upsertPod(bound);
    await s.settled();
    s.upsertPod({ ...bare, metadata: { ...bare.metadata, resourceVersion: '10' } });
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(40);
    expect(events).toEqual([]);
    // A newer copy is taken, and a recreated pod (new uid) is never judged stale: it replaces the
    // ended one, and the assignment it inherited names the old pod, so it holds nothing.
    s.upsertPod({ ...bound, metadata: { ...bound.metadata, resourceVersion: '13' }, status: { phase: 'Succeeded' } });
    expect(events).toEqual(['n1:pod-ended']);
    s.upsertPod({ ...bound, metadata: { ...bound.metadata, uid: 'uid-p2', resourceVersion: '5' } });
    await s.settled();
    expect(s.pod('default', 'p')?.metadata?.uid).toBe('uid-p2');
    expect(cardOf(s, 'n1', 0)?.usedCore).toBe(0);
  });

  it('tracks pending assignments until the node agent allocates them', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    s.upsertPod(assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }], { allocated: false }));
    await s.settled();
    expect(s.snapshot().nodes.get('n1')?.pending).toEqual([
      { podUid: 'uid-a', pod: 'default/a', coreAmounts: [30], assignedAtMs: Date.parse('2026-11-22T04:00:00Z') },
    ]);
  });
});

describe('ClusterState.unplacedPods', () => {
  const onNode = (pod: ReturnType<typeof gpuPod>, node: string, status?: { phase: string; reason?: string }) => ({
    ...pod,
    spec: { ...pod.spec, nodeName: node },
    ...(status ? { status } : {}),
  });

  it('lists GPU pods on a node that hold nothing, and leaves out the ones that hold their cards', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    // Placed the vcuda way: holds its card.
    s.upsertPod(assignedPod('placed', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]));
    // Exempt namespace or fail-open hook down, then spec.nodeName by hand: no assignment.
    s.upsertPod(onNode(gpuPod('by-hand', [{ core: 800 }], { namespace: 'exempt' }), 'n1'));
    // A plain pod with a forged assignment asks no GPU: not this list's (the holds refuse it).
    s.upsertPod(forgedPlainPod('n1', { name: 'forger' }));
    // What the kubelet made of one such pod once the node agent's Allocate refused it.
    s.upsertPod(
      onNode(gpuPod('refused', [{ core: 50 }]), 'n1', { phase: 'Failed', reason: 'UnexpectedAdmissionError' }),
    );
    // Not placed yet, finished, failed for another reason, or asking no GPU: none of them.
    s.upsertPod(gpuPod('pending', [{ core: 50 }]));
    s.upsertPod(onNode(gpuPod('done', [{ core: 50 }]), 'n1', { phase: 'Succeeded' }));
    s.upsertPod(onNode(gpuPod('crashed', [{ core: 50 }]), 'n1', { phase: 'Failed', reason: 'Error' }));
    await s.settled();
    expect(s.unplacedPods()).toEqual([
      { namespace: 'default', pod: 'refused', node: 'n1', phase: 'Failed', reason: 'refused-by-kubelet' },
      { namespace: 'exempt', pod: 'by-hand', node: 'n1', phase: 'Pending', reason: 'no-assignment' },
    ]);
    expect(cardOf(s, 'n1', 0)).toMatchObject({ usedCore: 30 });
  });

  it('lists a pod whose assignment did not verify, and drops it once it holds its cards', async () => {
    const s = testState();
    s.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const placed = assignedPod('p', 'n1', [{ core: 30, memoryMiB: 1000, cards: [0] }]);
    const tampered = {
      ...placed,
      metadata: {
        ...placed.metadata,
        annotations: { ...placed.metadata?.annotations, [vcudaAnnotations.assignment]: 'not.a.token' },
      },
    };
    s.upsertPod(tampered);
    await s.settled();
    expect(s.unplacedPods()).toEqual([
      { namespace: 'default', pod: 'p', node: 'n1', phase: 'Running', reason: 'assignment-not-verified' },
    ]);
    s.upsertPod(placed);
    await s.settled();
    expect(s.unplacedPods()).toEqual([]);
  });
});

describe('ClusterState: memory burst per card', () => {
  it('carries what the node publishes about each card into the snapshot, and nothing it did not say', () => {
    const node = gpuNode({ name: 'n1', cards: 3 });
    const annotations = node.metadata?.annotations ?? {};
    const inv = JSON.parse(annotations[vcudaAnnotations.inventory] ?? '{}') as { cards: Record<string, unknown>[] };
    inv.cards.forEach((c, i) => {
      if (i < 2) c['memoryBurst'] = i === 0;
    });
    const s = testState();
    s.upsertNode({
      ...node,
      metadata: { ...node.metadata, annotations: { [vcudaAnnotations.inventory]: JSON.stringify(inv) } },
    });
    expect([0, 1, 2].map((i) => cardOf(s, 'n1', i)?.memoryBurst)).toEqual([true, false, undefined]);
  });
});
