import { describe, expect, it } from 'vitest';
import { resourceNames } from '../../contract/index.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import { stalledPods } from './stalled-pods.js';

const names = resourceNames('nvidia.com');
const unschedulable = { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/2 nodes' };

function pod(
  name: string,
  o: {
    gpu?: boolean;
    schedulerName?: string;
    node?: string;
    condition?: object;
    phase?: string;
    deleting?: boolean;
  } = {},
): PodWithStatus {
  return {
    metadata: {
      name,
      namespace: 'team-a',
      uid: `uid-${name}`,
      ...(o.deleting ? { deletionTimestamp: '2026-11-24T00:00:00Z' } : {}),
    },
    spec: {
      ...(o.node ? { nodeName: o.node } : {}),
      ...(o.schedulerName ? { schedulerName: o.schedulerName } : {}),
      containers: [
        {
          name: 'c',
          resources: { limits: o.gpu === false ? { cpu: '1' } : { [names.core]: '20', [names.memory]: '4096' } },
        },
      ],
    } as PodWithStatus['spec'],
    status: { phase: o.phase ?? 'Pending', conditions: [o.condition ?? unschedulable] } as PodWithStatus['status'],
  };
}

describe('stalledPods', () => {
  it('finds the pending vcuda pods kube-scheduler parked as unschedulable, and only those', () => {
    const pods = [
      pod('parked'),
      pod('parked-by-scheduler-name', { gpu: false, schedulerName: 'vcuda-scheduler' }),
      pod('not-ours', { gpu: false, schedulerName: 'default-scheduler' }),
      pod('bound', { node: 'n1' }),
      pod('deleting', { deleting: true }),
      pod('finished', { phase: 'Failed' }),
      pod('error-backing-off', { condition: { ...unschedulable, reason: 'SchedulerError' } }),
      pod('scheduled', { condition: { type: 'PodScheduled', status: 'True' } }),
    ];
    expect(stalledPods(pods, { names, schedulerName: 'vcuda-scheduler' }).map((t) => t.name)).toEqual([
      'parked',
      'parked-by-scheduler-name',
    ]);
    expect(stalledPods([pod('parked')], { names })).toEqual([
      { namespace: 'team-a', name: 'parked', uid: 'uid-parked' },
    ]);
  });
});
