import { describe, expect, it } from 'vitest';
import type { ClaimShareRow } from '../../db/ledger.js';
import { assignedPod, cardUuid, grantsAsWritten } from '../../test/support/control-plane/builders.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import {
  judgeClaimSample,
  judgeSample,
  NODE_NAME_EXTRA,
  POD_NAME_EXTRA,
  POD_UID_EXTRA,
  writerNodeOf,
} from './usage-writer.js';

const lookup =
  (...pods: PodWithStatus[]) =>
  (namespace: string, name: string) =>
    pods.find((p) => p.metadata?.namespace === namespace && p.metadata?.name === name);
const ref = (over: Partial<Parameters<typeof judgeSample>[1]> = {}) => ({
  podUid: 'uid-p',
  namespace: 'default',
  pod: 'p',
  container: 'c0',
  cardUuid: cardUuid('n1', 0),
  ...over,
});

// In the control plane the cluster view verified the assignment first; here it is read as written.
const verified = grantsAsWritten;

describe('judgeSample', () => {
  const onN1 = assignedPod('p', 'n1', [{ core: 30, memoryMiB: 1024, cards: [0] }]);

  it("accepts a granted card of a pod assigned to the writer's node", () => {
    expect(judgeSample('n1', ref(), lookup(onN1), verified)).toBe('own');
  });

  it('refuses a pod assigned elsewhere even before the Binding names its node', () => {
    const pending: PodWithStatus = { ...onN1, spec: { containers: [] } };
    expect(judgeSample('n2', ref(), lookup(pending), verified)).toEqual({
      refused: 'pod default/p is assigned to node n1, not n2',
    });
  });

  it('records nothing, and refuses nothing, for a pod without an assignment or with one for another pod', () => {
    const plain: PodWithStatus = {
      metadata: { name: 'p', namespace: 'default', uid: 'uid-p' },
      spec: { containers: [] },
    };
    expect(judgeSample('n1', ref(), lookup(plain), verified)).toBe('unknown');
    // An assignment copied from another pod (its UID inside differs) grants nothing here.
    const copied: PodWithStatus = { ...onN1, metadata: { ...onN1.metadata, uid: 'uid-other' } };
    expect(judgeSample('n1', ref({ podUid: 'uid-other' }), lookup(copied), verified)).toBe('unknown');
  });
});

describe('judgeSample with an assignment the cluster view did not verify', () => {
  it('records nothing for it: an unverified annotation cannot make samples count', () => {
    const forged = assignedPod('p', 'n1', [{ core: 30, memoryMiB: 1024, cards: [0] }]);
    expect(judgeSample('n1', ref(), lookup(forged), () => undefined)).toBe('unknown');
  });
});

describe('judgeClaimSample', () => {
  // A claim with two shares charged on n1: one on card 0, one on card 1 (the ledger's rows).
  const hold = (container: string, card: number, node = 'n1'): ClaimShareRow => ({
    holder: 'claim:u-train',
    namespace: 'ml',
    name: 'train',
    node,
    container,
    cardUuid: cardUuid(node, card),
  });
  const holds = [hold('gpu/s0', 0), hold('gpu/s1', 1)];
  const claimRef = (over: Partial<Parameters<typeof judgeClaimSample>[1]> = {}) =>
    ref({ podUid: 'claim:u-train', namespace: 'ml', pod: 'train', container: 'gpu/s0', ...over });

  it.each([
    ['a share on its own card, on the node it is charged on', 'n1', claimRef(), 'own'],
    ['a claim the ledger holds nothing of', 'n1', claimRef({ podUid: 'claim:u-other' }), 'unknown'],
    [
      'the claim from another node',
      'n2',
      claimRef(),
      { refused: 'resourceclaim ml/train is charged on node n1, not n2' },
    ],
    [
      'a share on a card charged to another share',
      'n1',
      claimRef({ cardUuid: cardUuid('n1', 1) }),
      { refused: `card ${cardUuid('n1', 1)} is not charged to share gpu/s0 of resourceclaim ml/train` },
    ],
    [
      'a share the ledger never charged',
      'n1',
      claimRef({ container: 'gpu/forged' }),
      { refused: `card ${cardUuid('n1', 0)} is not charged to share gpu/forged of resourceclaim ml/train` },
    ],
    [
      'the claim billed to another namespace',
      'n1',
      claimRef({ namespace: 'team-b' }),
      { refused: 'claim:u-train is resourceclaim ml/train in the ledger, not team-b/train' },
    ],
  ])('%s', (_, node, sample, verdict) => {
    expect(judgeClaimSample(node, sample, holds)).toEqual(verdict);
  });

  it('takes the node a claim was charged on before, after it moved: each period on the node that held it', () => {
    const moved = [hold('gpu/s0', 0, 'n1'), hold('gpu/s0', 0, 'n2')];
    expect(judgeClaimSample('n1', claimRef(), moved)).toBe('own');
    expect(judgeClaimSample('n2', claimRef({ cardUuid: cardUuid('n2', 0) }), moved)).toBe('own');
    expect(judgeClaimSample('n2', claimRef(), moved)).toEqual({
      refused: `card ${cardUuid('n1', 0)} is not charged to share gpu/s0 of resourceclaim ml/train`,
    });
  });
});

describe('writerNodeOf', () => {
  const agent = 'system:serviceaccount:vcuda-system:vcuda-node-agent';
  const agentPod: PodWithStatus = {
    metadata: { name: 'agent-x', namespace: 'vcuda-system', uid: 'uid-agent-x' },
    spec: { nodeName: 'n7', containers: [] },
  };

  it("prefers the API server's node name, else the node of the bound pod in the caller's namespace", () => {
    expect(writerNodeOf({ username: agent, groups: [], extra: { [NODE_NAME_EXTRA]: ['n3'] } }, lookup())).toBe('n3');
    const bound = { [POD_NAME_EXTRA]: ['agent-x'], [POD_UID_EXTRA]: ['uid-agent-x'] };
    expect(writerNodeOf({ username: agent, groups: [], extra: bound }, lookup(agentPod))).toBe('n7');
    // The same pod name in another namespace's service account is not that pod.
    const other = 'system:serviceaccount:team-a:vcuda-node-agent';
    expect(() => writerNodeOf({ username: other, groups: [], extra: bound }, lookup(agentPod))).toThrow(
      /not known yet/,
    );
  });

  it('refuses ambiguous or missing bindings', () => {
    const twoNodes = { [NODE_NAME_EXTRA]: ['n1', 'n2'] };
    expect(() => writerNodeOf({ username: agent, groups: [], extra: twoNodes }, lookup())).toThrow(/bound to no pod/);
    expect(() => writerNodeOf({ username: 'alice', groups: [] }, lookup())).toThrow(/bound to no pod/);
  });
});
