import { describe, expect, it } from 'vitest';
import { assignedPod, cardUuid, grantsAsWritten } from '../../test/support/control-plane/builders.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import { judgeSample, NODE_NAME_EXTRA, POD_NAME_EXTRA, POD_UID_EXTRA, writerNodeOf } from './usage-writer.js';

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
