import { describe, expect, it } from 'vitest';
import { resourceNames, vcudaAnnotations } from '../../contract/index.js';
import { unsignedAssignment } from '../../test/support/control-plane/builders.js';
import { type PodView, toPodView } from './pod-view.js';
import { migSteeringHint, steeringHint } from './steering.js';

const names = resourceNames();

/** An unsigned token whose claims carry the grant: steering only peeks, never trusts. */
function token(cards: { uuid: string; core: number }[]): string {
  return unsignedAssignment({
    v: 1,
    pod: { uid: 'u', namespace: 'ns', name: 'p' },
    node: 'n1',
    cluster: 'c',
    containers: [
      { name: 'main', isInit: false, cards: cards.map((c) => ({ ...c, memoryBytes: 1 })), coreLimit: 30, mode: 'hard' },
    ],
  });
}

const pod = (name: string, uuid: string): PodView =>
  toPodView(
    {
      metadata: {
        uid: `uid-${name}`,
        namespace: 'ns',
        name,
        annotations: { [vcudaAnnotations.assignment]: token([{ uuid, core: 30 }]) },
      },
      spec: { nodeName: 'n1', containers: [{ name: 'main', resources: { limits: { [names.core]: '30' } } }] },
    },
    names,
  );

const hint = (pods: PodView[], started: string[] = []) =>
  steeringHint({
    coreDevices: 30,
    nodeName: 'n1',
    pods,
    isStarted: (uid) => started.includes(uid),
    coreGroup: (uuid) => uuid.slice(-1),
  });

describe('steeringHint', () => {
  it('steers to the cards every waiting container of the size wants', () => {
    expect([...hint([pod('a', 'GPU-1'), pod('b', 'GPU-1')])]).toEqual([['1', 30]]);
  });

  it('gives no hint when waiting containers want different cards', () => {
    expect(hint([pod('a', 'GPU-1'), pod('b', 'GPU-2')]).size).toBe(0);
  });

  it('ignores containers already started', () => {
    expect([...hint([pod('a', 'GPU-1'), pod('b', 'GPU-2')], ['uid-a'])]).toEqual([['2', 30]]);
  });
});

const migPod = (name: string, uuid: string): PodView =>
  toPodView(
    {
      metadata: {
        uid: `uid-${name}`,
        namespace: 'ns',
        name,
        annotations: {
          [vcudaAnnotations.assignment]: unsignedAssignment({
            v: 1,
            pod: { uid: `uid-${name}`, namespace: 'ns', name },
            node: 'n1',
            cluster: 'c',
            containers: [
              {
                name: 'main',
                isInit: false,
                cards: [
                  { uuid, core: 100, memoryBytes: 1, mig: { parent: 'GPU-1', profile: '3g.40gb', start: 0, size: 4 } },
                ],
                coreLimit: 100,
                mode: 'hard',
              },
            ],
          }),
        },
      },
      spec: {
        nodeName: 'n1',
        containers: [{ name: 'main', resources: { limits: { [`${names.migPrefix}3g.40gb`]: '1' } } }],
      },
    },
    names,
  );

describe('migSteeringHint', () => {
  const migHint = (pods: PodView[], started: string[] = []) =>
    migSteeringHint({ profile: '3g.40gb', count: 1, nodeName: 'n1', pods, isStarted: (uid) => started.includes(uid) });

  it('steers to the instances the waiting containers of the profile want, only when they all want the same', () => {
    expect(migHint([migPod('a', 'MIG-1')])).toEqual(['MIG-1']);
    expect(migHint([migPod('a', 'MIG-1'), migPod('b', 'MIG-2')])).toEqual([]);
    expect(migHint([migPod('a', 'MIG-1'), migPod('b', 'MIG-2')], ['uid-a'])).toEqual(['MIG-2']);
    expect(
      migSteeringHint({
        profile: '1g.10gb',
        count: 1,
        nodeName: 'n1',
        pods: [migPod('a', 'MIG-1')],
        isStarted: () => false,
      }),
    ).toEqual([]);
  });
});
