import { describe, expect, it } from 'vitest';
import { vcudaAnnotations } from '../../contract/index.js';
import { matchAllocate, nextContainer } from './match.js';
import type { PodView } from './pod-view.js';

const pod = (name: string, cores: number[], extra: Partial<PodView> = {}): PodView => ({
  uid: `uid-${name}`,
  namespace: 'ns',
  name,
  nodeName: 'n1',
  annotations: {},
  gpuContainers: cores.map((core, i) => ({ name: `c${i}`, isInit: false, core })),
  containerIds: {},
  isFinished: false,
  ...extra,
});

const base = { nodeName: 'n1', progress: new Map<string, Set<string>>() };

describe('matchAllocate', () => {
  it.each([
    { name: 'the one pod waiting for that size', pods: [pod('a', [30]), pod('b', [50])], core: 50, want: 'b' },
    {
      name: 'a pod on another node never matches',
      pods: [pod('a', [30], { nodeName: 'n2' }), pod('b', [30])],
      core: 30,
      want: 'b',
    },
    {
      name: 'an allocated pod is no longer pending',
      pods: [
        pod('a', [30], { annotations: { [vcudaAnnotations.allocatedAt]: '2026-01-01T00:00:00Z' } }),
        pod('b', [30]),
      ],
      core: 30,
      want: 'b',
    },
    {
      name: 'a finished pod is not pending',
      pods: [pod('a', [30], { isFinished: true }), pod('b', [30])],
      core: 30,
      want: 'b',
    },
  ])('$name', ({ pods, core, want }) => {
    const m = matchAllocate({ ...base, pods, coreDevices: core });
    expect(m.ok && m.pod.name).toBe(want);
  });

  it('walks a pod container by container', () => {
    const p = pod('multi', [30, 50]);
    const progress = new Map([['uid-multi', new Set(['c0'])]]);
    expect(nextContainer(p, progress)?.name).toBe('c1');
    const m = matchAllocate({ nodeName: 'n1', progress, pods: [p, pod('other', [30])], coreDevices: 30 });
    // multi's next container asks 50, so the 30 is other's.
    expect(m.ok && m.pod.name).toBe('other');
  });

  it('refuses to guess between two pods of one shape', () => {
    const m = matchAllocate({ ...base, pods: [pod('b', [30]), pod('a', [30])], coreDevices: 30 });
    expect(m).toMatchObject({ ok: false, reason: 'ambiguous' });
    expect(!m.ok && m.message).toMatch(/pending pods ns\/a, ns\/b each wait/);
  });

  it('pods whose container sizes overlap are ambiguous even when their multisets differ', () => {
    // [30] and [30, 50] are different multisets but both wait for a 30-core Allocate.
    const m = matchAllocate({ ...base, pods: [pod('a', [30]), pod('b', [30, 50])], coreDevices: 30 });
    expect(m).toMatchObject({ ok: false, reason: 'ambiguous' });
    // After b's 30 is placed, b waits for 50 and a [50] pod would collide with it.
    const progress = new Map([['uid-b', new Set(['c0'])]]);
    const later = matchAllocate({
      nodeName: 'n1',
      progress,
      pods: [pod('b', [30, 50]), pod('c', [50])],
      coreDevices: 50,
    });
    expect(later).toMatchObject({ ok: false, reason: 'ambiguous' });
  });

  it('says what is pending when nothing matches', () => {
    const m = matchAllocate({ ...base, pods: [pod('a', [40])], coreDevices: 30 });
    expect(m).toMatchObject({ ok: false, reason: 'no-candidate' });
    expect(!m.ok && m.message).toMatch(/pending: ns\/a \(next 40 core\)/);
  });

  it('never matches a refused pod again', () => {
    const m = matchAllocate({ ...base, pods: [pod('a', [30])], coreDevices: 30, refused: new Set(['uid-a']) });
    expect(m.ok).toBe(false);
  });
});
