/**
 * Only verified assignments hold capacity: every way an attacker who can create or edit pods might
 * write a vcuda.io/assignment annotation, tried against the cluster view the extender places with.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { generateSigningKey, jwksOf, signAssignment, vcudaAnnotations } from '../contract/index.js';
import {
  assignedPod,
  assignmentFor,
  forgedPlainPod,
  gpuNode,
  gpuPod,
  policy,
  signedAssignment,
  testKeySet,
  testState,
} from '../test/support/control-plane/builders.js';
import { AssignmentTrust, createAssignmentTrustMetrics, type UnverifiedAssignment } from './assignment-trust.js';
import { ClusterState } from './cluster-state.js';
import { filterNodes } from './extender/filter-decision.js';
import type { PodWithStatus } from './placement/cluster-snapshot.js';
import { readPlacementRequest } from './placement/placement-request.js';

const ctx = {
  nowMs: Date.parse('2026-11-22T04:00:30Z'),
  heartbeatStaleMs: 60_000,
  pendingTtlMs: 300_000,
  memoryUnitMiB: 1,
};

function usedCore(state: ClusterState, node: string): number {
  return state.snapshot().nodes.get(node)?.totals.usedCore ?? -1;
}

function withToken(pod: PodWithStatus, token: string): PodWithStatus {
  return {
    ...pod,
    metadata: { ...pod.metadata, annotations: { ...pod.metadata?.annotations, [vcudaAnnotations.assignment]: token } },
  };
}

function reportingState(): { state: ClusterState; reports: UnverifiedAssignment[]; registry: Registry } {
  const reports: UnverifiedAssignment[] = [];
  const registry = new Registry();
  const metrics = createAssignmentTrustMetrics(registry);
  const state = testState({
    onUnverified: (u) => {
      reports.push(u);
      metrics.unverified.inc({ reason: u.reason });
    },
  });
  return { state, reports, registry };
}

describe('only verified assignments hold capacity', () => {
  it('a plain pod with a hand-written assignment to all 8 cards does not take the node out of placement', async () => {
    const { state, reports } = reportingState();
    state.upsertNode(gpuNode({ name: 'n8', cards: 8 }));
    state.upsertPod(forgedPlainPod('n8', { bound: false }));
    await state.settled();
    expect(usedCore(state, 'n8')).toBe(0);
    const eightCards = readPlacementRequest(gpuPod('big', [{ core: 800 }]), policy, 'binpack');
    expect(filterNodes(eightCards, state.snapshot(), ['n8'], ctx).feasible).toEqual(['n8']);
    expect(reports).toEqual([
      {
        pod: { namespace: 'default', name: 'forger', uid: 'uid-forger' },
        reason: 'malformed',
        message: expect.any(String),
      },
    ]);
  });

  it('reports a refused assignment once per pod and token, and counts it in the metric', async () => {
    const { state, reports, registry } = reportingState();
    state.upsertNode(gpuNode({ name: 'n8', cards: 8 }));
    const forged = forgedPlainPod('n8');
    // The watch delivers the pod again and again (status updates, relists).
    for (let rv = 1; rv <= 5; rv++) {
      state.upsertPod({ ...forged, metadata: { ...forged.metadata, resourceVersion: String(rv) } });
      await state.settled();
    }
    expect(reports).toHaveLength(1);
    // Another forged token on the same pod is another attempt, reported again.
    const tampered = `${forged.metadata?.annotations?.[vcudaAnnotations.assignment]}x`;
    state.upsertPod(withToken(forged, tampered));
    await state.settled();
    expect(reports).toHaveLength(2);
    const text = await registry.getSingleMetricAsString('vcuda_unverified_assignments_total');
    expect(text).toContain('vcuda_unverified_assignments_total{reason="malformed"} 2');
    expect(usedCore(state, 'n8')).toBe(0);
  });

  it('a signed assignment copied from pod A onto pod B holds nothing for B', async () => {
    const { state, reports } = reportingState();
    state.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    const a = assignedPod('a', 'n1', [{ core: 30, memoryMiB: 1024, cards: [0] }]);
    const b = assignedPod('b', 'n1', [{ core: 30, memoryMiB: 1024, cards: [1] }]);
    state.upsertPod(a);
    state.upsertPod(withToken(b, a.metadata?.annotations?.[vcudaAnnotations.assignment] as string));
    await state.settled();
    expect(
      state
        .snapshot()
        .nodes.get('n1')
        ?.cards.map((c) => c.usedCore),
    ).toEqual([30, 0]);
    expect(state.heldAssignment('default', 'b')).toBeUndefined();
    expect(reports.map((r) => [r.pod.name, r.reason])).toEqual([['b', 'wrong-pod']]);
  });

  it('an assignment we signed holds nothing when it grants other amounts than the pod asks', async () => {
    const { state, reports } = reportingState();
    state.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    // The pod asks 30 core and 1 GiB; the signed token grants it 60 GiB.
    const pod = assignedPod('p', 'n1', [{ core: 30, memoryMiB: 1024, cards: [0] }]);
    const ref = { uid: 'uid-p', namespace: 'default', name: 'p' };
    state.upsertPod(
      withToken(pod, signedAssignment(assignmentFor(ref, 'n1', [{ core: 30, memoryMiB: 61440, cards: [0] }]))),
    );
    await state.settled();
    expect(usedCore(state, 'n1')).toBe(0);
    expect(reports.map((r) => r.reason)).toEqual(['spec-mismatch']);
    expect(reports[0]?.message).toMatch(/grants 61440 MiB .* asks 1024 MiB/);
  });

  it('refuses tokens signed with another key, under our kid or its own, and one for another node', async () => {
    const { state, reports } = reportingState();
    state.upsertNode(gpuNode({ name: 'n1', cards: 3 }));
    const grants = (card: number) => [{ core: 30, memoryMiB: 1024, cards: [card] }];
    const sign = async (kid: string, name: string, card: number) => {
      const key = await generateSigningKey(kid);
      const a = assignmentFor({ uid: `uid-${name}`, namespace: 'default', name }, 'n1', grants(card));
      return signAssignment(a, key, { nowSeconds: ctx.nowMs / 1000, ttlSeconds: 600 });
    };
    state.upsertPod(withToken(assignedPod('impostor', 'n1', grants(0)), await sign('test-1', 'impostor', 0)));
    state.upsertPod(withToken(assignedPod('stranger', 'n1', grants(1)), await sign('attacker', 'stranger', 1)));
    // Signed by us for n2, on a pod bound to n1.
    const elsewhere = assignmentFor({ uid: 'uid-moved', namespace: 'default', name: 'moved' }, 'n2', grants(2));
    state.upsertPod(withToken(assignedPod('moved', 'n1', grants(2)), signedAssignment(elsewhere)));
    await state.settled();
    expect(usedCore(state, 'n1')).toBe(0);
    expect(reports.map((r) => [r.pod.name, r.reason]).sort()).toEqual([
      ['impostor', 'bad-signature'],
      ['moved', 'wrong-node'],
      ['stranger', 'unknown-kid'],
    ]);
  });

  it('counts a token only once verified, and what this replica signed at once', async () => {
    const state = testState();
    state.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    const theirs = assignedPod('theirs', 'n1', [{ core: 30, memoryMiB: 1024, cards: [0] }]);
    state.upsertPod(theirs);
    // Not verified yet: holds nothing (the ledger arbitrates a bind racing this gap).
    expect(usedCore(state, 'n1')).toBe(0);
    await state.settled();
    expect(usedCore(state, 'n1')).toBe(30);
    // A bind of ours vouches for its own token before writing it: counted in the same tick.
    const ref = { uid: 'uid-ours', namespace: 'default', name: 'ours' };
    const grant = [{ core: 40, memoryMiB: 1024, cards: [1] }];
    const ours = assignedPod('ours', 'n1', grant);
    const token = ours.metadata?.annotations?.[vcudaAnnotations.assignment] as string;
    state.trust.vouch(token, assignmentFor(ref, 'n1', grant));
    state.upsertPod(ours);
    expect(usedCore(state, 'n1')).toBe(70);
  });

  it('verifies against the current key set: a key taken out of it stops counting', async () => {
    let jwks = testKeySet.jwks;
    const trust = new AssignmentTrust({ jwks: () => jwks });
    const state = new ClusterState({ trust, quantity: policy });
    state.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const pod = assignedPod('p', 'n1', [{ core: 30, memoryMiB: 1024, cards: [0] }]);
    state.upsertPod(pod);
    await state.settled();
    expect(usedCore(state, 'n1')).toBe(30);
    jwks = jwksOf([await generateSigningKey('test-2')]);
    state.upsertPod({ ...pod, status: { phase: 'Running', podIP: '10.0.0.9' } } as PodWithStatus);
    await state.settled();
    expect(usedCore(state, 'n1')).toBe(0);
  });
});
