import { describe, expect, it } from 'vitest';
import type { LedgerHold } from '../../db/ledger-holds.js';
import { assignedPod, assignmentFor, cardUuid, gpuNode, testState } from '../../test/support/control-plane/builders.js';
import { assumedHoldOf, holdOfLedgerReservation } from '../placement/holds/index.js';
import { isDueForSettling, settleHold, settleVerdict, type UnconfirmedHoldsDeps } from './unconfirmed-holds.js';

const T0 = new Date('2026-11-22T04:00:00Z');

/** The ledger's hold of assignedPod(name, 'n1', one 30-core 1000 MiB share on card 0). */
function holdOf(name: string, over: Partial<LedgerHold> = {}): LedgerHold {
  return {
    podUid: `uid-${name}`,
    namespace: 'default',
    pod: name,
    node: 'n1',
    isBound: false,
    reservedAt: T0,
    owner: 'replica-a',
    isOwnerLapsed: false,
    cards: [{ cardUuid: cardUuid('n1', 0), core: 30, memoryMiB: 1000 }],
    ...over,
  };
}
const grants = [{ core: 30, memoryMiB: 1000, cards: [0] }];
const runningPod = (name: string) => assignedPod(name, 'n1', grants);
const assignmentOf = (name: string, node = 'n1') =>
  assignmentFor({ uid: `uid-${name}`, namespace: 'default', name }, node, grants);
const unbound = (name: string) => {
  const p = runningPod(name);
  return { ...p, spec: { ...p.spec, nodeName: undefined }, status: { phase: 'Pending' } };
};

describe('which unconfirmed holds are due', () => {
  it('a confirmed hold never; an unconfirmed one once its owner lapsed or its time is up', () => {
    const now = T0.getTime() + 5_000;
    expect(isDueForSettling(holdOf('a', { isBound: true, isOwnerLapsed: true }), now + 120_000, 60_000)).toBe(false);
    expect(isDueForSettling(holdOf('a'), now, 60_000)).toBe(false);
    expect(isDueForSettling(holdOf('a', { isOwnerLapsed: true }), now, 60_000)).toBe(true);
    expect(isDueForSettling(holdOf('a'), T0.getTime() + 60_001, 60_000)).toBe(true);
  });
});

describe('settling a hold from its pod as the API server shows it', () => {
  it('confirms, never releases, a pod running on the hold with an assignment that verifies', () => {
    const v = settleVerdict(holdOf('a', { isOwnerLapsed: true }), runningPod('a'), assignmentOf('a'));
    expect(v.action).toBe('confirm');
  });

  it('keeps a pod bound here whose assignment does not verify or names other cards', () => {
    expect(settleVerdict(holdOf('a'), runningPod('a'), undefined).action).toBe('keep');
    const other = assignmentFor({ uid: 'uid-a', namespace: 'default', name: 'a' }, 'n1', [
      { core: 30, memoryMiB: 1000, cards: [1] },
    ]);
    expect(settleVerdict(holdOf('a'), runningPod('a'), other).action).toBe('keep');
  });

  it('releases when the pod is gone, recreated, finished or bound to another node', () => {
    expect(settleVerdict(holdOf('a'), undefined, undefined)).toMatchObject({ action: 'release', why: /gone/ });
    const recreated = { ...runningPod('a'), metadata: { ...runningPod('a').metadata, uid: 'uid-new' } };
    expect(settleVerdict(holdOf('a'), recreated, undefined).action).toBe('release');
    const done = { ...runningPod('a'), status: { phase: 'Succeeded' } };
    expect(settleVerdict(holdOf('a'), done, assignmentOf('a'))).toMatchObject({ action: 'release', why: /finished/ });
    const elsewhere = assignedPod('a', 'n2', grants);
    expect(settleVerdict(holdOf('a'), elsewhere, assignmentOf('a', 'n2'))).toMatchObject({ why: /bound to n2/ });
  });

  it('releases a pod without a Binding: its owner is gone, or its time is up', () => {
    expect(settleVerdict(holdOf('a', { isOwnerLapsed: true }), unbound('a'), undefined)).toMatchObject({
      action: 'release',
      why: /replica is gone/,
    });
    expect(settleVerdict(holdOf('a'), unbound('a'), undefined)).toMatchObject({ why: /timeout/ });
  });

  it('acts through the ledger, and a pod that cannot be read is left for the next round', async () => {
    const calls: string[] = [];
    const deps = (pod: Awaited<ReturnType<UnconfirmedHoldsDeps['readPod']>> | Error): UnconfirmedHoldsDeps => ({
      cluster: 'test',
      ledger: {
        confirmMany: async (_c, uids) => {
          calls.push(`confirm ${uids.join()}`);
          return { missing: [] };
        },
        releaseUnconfirmed: async (_c, uid) => {
          calls.push(`release ${uid}`);
          return true;
        },
      },
      readPod: async () => {
        if (pod instanceof Error) throw pod;
        return pod;
      },
      verifiedAssignment: async (p) => (p.metadata?.uid === 'uid-a' ? assignmentOf('a') : undefined),
    });
    expect((await settleHold(deps(runningPod('a')), holdOf('a'))).action).toBe('confirm');
    expect((await settleHold(deps(undefined), holdOf('b'))).action).toBe('release');
    await expect(settleHold(deps(new Error('API server unreachable')), holdOf('c'))).rejects.toThrow(/unreachable/);
    expect(calls).toEqual(['confirm uid-a', 'release uid-b']);
  });
});

describe('ledger holds in the cluster view', () => {
  const used = (state: ReturnType<typeof testState>) => state.snapshot().nodes.get('n1')?.cards[0]?.usedCore;

  it('counts another replica’s hold on its cards, once, until the pod’s own hold or the ledger drops it', async () => {
    const state = testState();
    state.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    const freed: string[] = [];
    state.onCapacityFreed((e) => freed.push(e.why));
    const inFlight = { ...holdOf('a'), isOwn: false, hold: holdOfLedgerReservation(holdOf('a')) };
    state.setLedgerHolds([inFlight]);
    expect(used(state)).toBe(30);
    state.setLedgerHolds([inFlight]); // read again: still once
    expect(used(state)).toBe(30);
    // The Binding shows: the pod counts through its own assignment, not twice.
    state.upsertPod(runningPod('a'));
    await state.settled();
    expect(state.heldAssignment('default', 'a')).toBeDefined();
    expect(used(state)).toBe(30);
    state.setLedgerHolds([inFlight]);
    expect(used(state)).toBe(30);
    // A hold the ledger no longer lists frees its cards, and says so.
    state.setLedgerHolds([{ ...holdOf('b'), isOwn: false, hold: holdOfLedgerReservation(holdOf('b')) }]);
    expect(used(state)).toBe(60);
    state.setLedgerHolds([]);
    expect(used(state)).toBe(30);
    expect(freed).toContain('ledger-released');
  });

  it('a bind’s assume neither drops another replica’s hold of the pod nor counts this replica’s twice', () => {
    const state = testState();
    state.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    const foreign = { ...holdOf('a'), isOwn: false, hold: holdOfLedgerReservation(holdOf('a')) };
    state.setLedgerHolds([foreign]);
    // Another bind of the pod tries (and will be told the pod is held): both counted meanwhile.
    state.assumePod(unbound('a'), assumedHoldOf(assignmentOf('a'), T0.toISOString()));
    expect(used(state)).toBe(60);
    state.restorePod(unbound('a'));
    expect(used(state)).toBe(30); // the other replica's hold still counts
    // This replica's own reservation while its bind has the pod assumed: once.
    state.setLedgerHolds([]);
    state.assumePod(unbound('a'), assumedHoldOf(assignmentOf('a'), T0.toISOString()));
    state.setLedgerHolds([{ ...foreign, isOwn: true }]);
    expect(used(state)).toBe(30);
  });
});
