import { describe, expect, it } from 'vitest';
import { peekAssignment, vcudaAnnotations } from '../../../contract/index.js';
import { assignedPod, gpuPod, policy } from '../../../test/support/control-plane/builders.js';
import { judgePodHold, type TokenVerdict, verifiedAssignmentOf } from './index.js';

const grants = [{ core: 30, memoryMiB: 512, cards: [0] }];

/** The verdict a verified signature gives: the claims the token carries. */
function trusted(token: string): TokenVerdict {
  const a = peekAssignment(token);
  if (!a) throw new Error('test token does not decode');
  return { ok: true, assignment: a };
}

describe('judgePodHold', () => {
  it('turns a verified assignment into a pending hold on its node until the pod is allocated', () => {
    const pod = assignedPod('a', 'n1', grants, { allocated: false });
    const judged = judgePodHold(pod, trusted, policy);
    expect(judged.kind).toBe('held');
    if (judged.kind !== 'held') return;
    expect(judged.hold.kind).toBe('pod-assignment');
    expect(judged.hold.node).toBe('n1');
    expect([...judged.hold.cardUse.values()]).toEqual([{ core: 30, memoryMiB: 512 }]);
    expect(judged.hold.pending?.pod).toBe('default/a');
    const allocated = judgePodHold(assignedPod('b', 'n1', grants), trusted, policy);
    expect(allocated.kind === 'held' && allocated.hold.pending).toBeUndefined();
  });

  it('holds nothing for a finished pod, an unverified token or one granting another pod', () => {
    expect(judgePodHold(assignedPod('a', 'n1', grants, { phase: 'Succeeded' }), trusted, policy)).toEqual({
      kind: 'none',
    });
    expect(judgePodHold(assignedPod('a', 'n1', grants), () => undefined, policy).kind).toBe('unknown');
    const theirs = assignedPod('theirs', 'n1', grants).metadata?.annotations?.[vcudaAnnotations.assignment] as string;
    const mine = assignedPod('mine', 'n1', grants);
    const stolen = { ...mine, metadata: { ...mine.metadata, annotations: { [vcudaAnnotations.assignment]: theirs } } };
    expect(judgePodHold(stolen, trusted, policy)).toMatchObject({ kind: 'refused', reason: 'wrong-pod' });
  });
});

describe('verifiedAssignmentOf', () => {
  it('asks for no verification when the pod carries no assignment', async () => {
    let asked = 0;
    const verify = async (token: string) => {
      asked += 1;
      return trusted(token);
    };
    expect(await verifiedAssignmentOf(gpuPod('p', [{ core: 30 }]), verify, policy)).toBeUndefined();
    expect(asked).toBe(0);
    expect((await verifiedAssignmentOf(assignedPod('a', 'n1', grants), verify, policy))?.node).toBe('n1');
    expect(asked).toBe(1);
  });
});
