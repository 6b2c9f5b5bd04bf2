import { describe, expect, it } from 'vitest';
import type { KubeObj } from '../kube-client.js';
import { generatedClaimName, isPodDone, owningPod } from './resource-claim-sync.js';

const pod = (status: Record<string, unknown>, spec: Record<string, unknown> = {}, meta: Record<string, unknown> = {}) =>
  ({ metadata: { name: 'p', uid: 'u', ...meta }, spec, status }) as KubeObj;

describe('resourceclaim controller rules', () => {
  it('names a made claim <pod>-<claim>-, both cut in proportion past 57 characters', () => {
    expect(generatedClaimName('template-pod', 'gpu')).toBe('template-pod-gpu-');
    const long = generatedClaimName('p'.repeat(60), 'c'.repeat(20));
    // 82 characters asked: 60·57/82 = 41 of the pod's, 20·57/82 = 13 of the claim's, no trailing dash.
    expect(long).toBe(`${'p'.repeat(41)}-${'c'.repeat(13)}`);
  });

  it.each([
    ['Running', {}, {}, false],
    ['Succeeded', {}, {}, true],
    ['Failed', { nodeName: 'n' }, {}, true],
    ['Pending', {}, { deletionTimestamp: '2026-01-01T00:00:00Z' }, true],
    ['Running', { nodeName: 'n' }, { deletionTimestamp: '2026-01-01T00:00:00Z' }, false],
  ])('a %s pod (spec %j, meta %j) is done: %s', (phase, spec, meta, done) => {
    expect(isPodDone(pod({ phase }, spec, meta))).toBe(done);
  });

  it('finds the pod a claim was made for only through a v1 Pod controller reference', () => {
    const claim = (refs: unknown[]) => ({ metadata: { name: 'c', ownerReferences: refs } }) as KubeObj;
    expect(owningPod(claim([{ apiVersion: 'v1', kind: 'Pod', name: 'p', uid: 'u', controller: true }]))?.uid).toBe('u');
    expect(owningPod(claim([{ apiVersion: 'v1', kind: 'Pod', name: 'p', uid: 'u' }]))).toBeUndefined();
    expect(
      owningPod(claim([{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'r', uid: 'u', controller: true }])),
    ).toBeUndefined();
  });
});
