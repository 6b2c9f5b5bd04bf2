/** Pods exactly as a Kubernetes 1.26 API server sends them (the payloads in webhooks/testdata/kubernetes-1.26/). */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resourceNames, vcudaAnnotations } from '../../contract/index.js';
import { unsignedAssignment } from '../../test/support/control-plane/builders.js';
import { type PodObject, toPodView } from './pod-view.js';

const fixture = (name: string) =>
  (
    JSON.parse(readFileSync(new URL(`../../webhooks/testdata/kubernetes-1.26/${name}`, import.meta.url), 'utf8')) as {
      request: { object: PodObject };
    }
  ).request.object;

describe('pod view of real payloads', () => {
  const names = resourceNames('nvidia.com');

  it('lists GPU containers in kubelet order with their core amounts, skipping CPU-only ones', () => {
    const pod = toPodView(fixture('admission-mutate-create-multi-container.json'), names);
    // `warm` (an init container without GPU resources) is skipped; `train` gave only requests=limits.
    expect(pod.gpuContainers).toEqual([
      { name: 'train', isInit: false, core: 200 },
      { name: 'sidecar', isInit: false, core: 10 },
    ]);
    expect(pod.isFinished).toBe(false);
  });

  it('reads a share pod and a pod without GPUs', () => {
    expect(toPodView(fixture('admission-mutate-create-share.json'), names).gpuContainers.map((c) => c.core)).toEqual([
      30,
    ]);
    expect(toPodView(fixture('admission-mutate-create-no-gpu.json'), names).gpuContainers).toEqual([]);
  });

  it('honours another resource domain', () => {
    const pod = toPodView(fixture('admission-mutate-create-share.json'), resourceNames('tencent.com'));
    expect(pod.gpuContainers).toEqual([]);
  });

  it('strips the runtime prefix from container ids', () => {
    const pod = toPodView(
      {
        metadata: { uid: 'u', name: 'p', namespace: 'n' },
        status: { phase: 'Running', containerStatuses: [{ name: 'main', containerID: 'containerd://abc' }] },
      },
      names,
    );
    expect(pod.containerIds).toEqual({ main: 'abc' });
  });

  describe('claimed grants', () => {
    const token = (uuid: string) =>
      unsignedAssignment({
        v: 1,
        pod: { uid: 'u', namespace: 'n', name: 'p' },
        node: 'n1',
        cluster: 'c',
        containers: [
          { name: 'main', isInit: false, cards: [{ uuid, core: 30, memoryBytes: 1 }], coreLimit: 30, mode: 'hard' },
        ],
      });
    const withToken = (t: string | undefined): PodObject => ({
      metadata: { uid: 'u', name: 'p', namespace: 'n', annotations: t ? { [vcudaAnnotations.assignment]: t } : {} },
    });
    const uuids = (v: ReturnType<typeof toPodView>) => v.claimedGrants.flatMap((g) => g.cards.map((c) => c.uuid));

    it('decodes the grants the assignment claims, and none without one or from garbage', () => {
      expect(uuids(toPodView(withToken(token('GPU-1')), names))).toEqual(['GPU-1']);
      expect(toPodView(withToken(undefined), names).claimedGrants).toEqual([]);
      expect(toPodView(withToken('not.a.jwt'), names).claimedGrants).toEqual([]);
    });

    it("keeps the previous version's grants while the token is unchanged, and decodes a new token", () => {
      const first = toPodView(withToken(token('GPU-1')), names);
      expect(toPodView(withToken(token('GPU-1')), names, first).claimedGrants).toBe(first.claimedGrants);
      expect(uuids(toPodView(withToken(token('GPU-2')), names, first))).toEqual(['GPU-2']);
      expect(toPodView(withToken(undefined), names, first).claimedGrants).toEqual([]);
    });
  });
});
