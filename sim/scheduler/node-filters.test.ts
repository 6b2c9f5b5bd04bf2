import { describe, expect, it } from 'vitest';
import {
  filterNode,
  parseQuantity,
  podRequests,
  type SchedNode,
  type SchedPod,
  summarizeFailures,
} from './node-filters.js';

const node = (over: Partial<SchedNode> = {}): SchedNode => ({
  metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1', zone: 'a' } },
  status: { allocatable: { cpu: '4', memory: '8Gi', pods: '110', 'nvidia.com/vcuda-core': '800' } },
  ...over,
});
const pod = (spec: SchedPod['spec'] = {}): SchedPod => ({
  metadata: { name: 'p', namespace: 'ns' },
  spec: { containers: [{ resources: { requests: { cpu: '1', memory: '1Gi' } } }], ...spec },
});
const empty = { usedOnNode: () => new Map<string, number>(), ignoredResources: new Set(['nvidia.com/vcuda-core']) };

describe('kube-scheduler basic filters', () => {
  it.each([
    ['500m', 0.5],
    ['2', 2],
    ['1Gi', 2 ** 30],
    ['1G', 1e9],
    ['128974848', 128974848],
  ])('parses quantity %s', (q, v) => expect(parseQuantity(q)).toBe(v));

  it('takes the largest init container when it exceeds the sum of the containers', () => {
    const p = pod({
      containers: [{ resources: { requests: { cpu: '1' } } }],
      initContainers: [{ resources: { limits: { cpu: '3' } } }],
    });
    expect(podRequests(p).get('cpu')).toBe(3);
  });

  it.each<[string, SchedPod, SchedNode, string | undefined]>([
    ['fits', pod(), node(), undefined],
    [
      'nodeSelector mismatch',
      pod({ nodeSelector: { zone: 'b' } }),
      node(),
      "node(s) didn't match Pod's node affinity/selector",
    ],
    ['hostname selector', pod({ nodeSelector: { 'kubernetes.io/hostname': 'n1' } }), node(), undefined],
    [
      'required affinity NotIn',
      pod({
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }],
            },
          },
        },
      }),
      node(),
      "node(s) didn't match Pod's node affinity/selector",
    ],
    [
      'untolerated taint',
      pod(),
      node({ spec: { taints: [{ key: 'gpu', value: 'yes', effect: 'NoSchedule' }] } }),
      'node(s) had untolerated taint {gpu: yes}',
    ],
    [
      'tolerated taint',
      pod({ tolerations: [{ key: 'gpu', operator: 'Exists' }] }),
      node({ spec: { taints: [{ key: 'gpu', value: 'yes', effect: 'NoSchedule' }] } }),
      undefined,
    ],
    [
      'PreferNoSchedule is no filter',
      pod(),
      node({ spec: { taints: [{ key: 'x', effect: 'PreferNoSchedule' }] } }),
      undefined,
    ],
    ['cordoned', pod(), node({ spec: { unschedulable: true } }), 'node(s) were unschedulable'],
    ['too much cpu', pod({ containers: [{ resources: { requests: { cpu: '5' } } }] }), node(), 'Insufficient cpu'],
    [
      'extended resource left to the extender',
      pod({ containers: [{ resources: { limits: { 'nvidia.com/vcuda-core': '900' } } }] }),
      node(),
      undefined,
    ],
    [
      'extended resource the node lacks',
      pod({ containers: [{ resources: { limits: { 'example.com/fpga': '1' } } }] }),
      node(),
      'Insufficient example.com/fpga',
    ],
  ])('%s', (_name, p, n, want) => expect(filterNode(p, n, empty)).toBe(want));

  it('counts what already runs on the node', () => {
    const used = {
      ...empty,
      usedOnNode: () =>
        new Map([
          ['cpu', 3.5],
          ['pods', 1],
        ]),
    };
    expect(filterNode(pod(), node(), used)).toBe('Insufficient cpu');
  });

  it("summarizes like kube-scheduler's FailedScheduling", () => {
    const reasons = new Map([
      ['a', 'Insufficient cpu'],
      ['b', 'Insufficient cpu'],
      ['c', 'node(s) were unschedulable'],
    ]);
    expect(summarizeFailures(4, reasons)).toBe(
      '0/4 nodes are available: 2 Insufficient cpu, 1 node(s) were unschedulable.',
    );
  });
});
