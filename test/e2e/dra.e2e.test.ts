/**
 * The DRA scenario on the simulator alone, against what kube-apiserver, kube-scheduler and
 * kube-controller-manager v1.36.3 answered for the same steps (recorded from
 * `dra-real.e2e.test.ts`, which compares the two live wherever `../shared/kubernetes-1.36/` is),
 * so the simulator's DRA is held to the real answers on every machine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { draScenario } from './dra-scenario.js';
import { type DraSim, startDraSim } from './dra-sim.js';

const share = (device: string, cores: string, memory: string, request = 'gpu') =>
  `${request} ${device} cores=${cores} memory=${memory} share=yes`;
const onNodeA = (step: string, results: string[]) => ({ step, scheduled: true, node: 'node-a', results });

/** What the real 1.36 control plane answered, step by step. */
const REAL_1_36 = [
  onNodeA('share-1', [share('gpu-0', '30', '8Gi')]),
  onNodeA('share-2', [share('gpu-0', '30', '8Gi')]),
  onNodeA('share-3', [share('gpu-0', '30', '8Gi')]),
  onNodeA('share-4', [share('gpu-1', '30', '8Gi')]),
  onNodeA('share-rounded', [share('gpu-1', '30', '7630Mi')]),
  {
    ...onNodeA('template', [share('gpu-1', '30', '8Gi')]),
    made: {
      statusEntry: 'gpu',
      namePrefix: 'template-pod-gpu-',
      nameLength: 22,
      owner: { apiVersion: 'v1', kind: 'Pod', name: 'template-pod', controller: true, sameUid: true },
      annotation: 'gpu',
      labels: { made: 'by-template' },
    },
  },
  { step: 'nowhere', scheduled: false, reason: '0/2 nodes are available: 2 cannot allocate all claims.' },
  {
    step: 'pods ended',
    scheduled: false,
    claims: {
      nowhere: 'free',
      'share-1': 'free',
      'share-2': 'free',
      'share-3': 'free',
      'share-4': 'free',
      'share-rounded': 'free',
    },
  },
  onNodeA('count-two', [share('gpu-0', '10', '1Gi'), share('gpu-1', '10', '1Gi')]),
  onNodeA('two-requests', [share('gpu-0', '10', '1Gi', 'a'), share('gpu-0', '10', '1Gi', 'b')]),
  onNodeA('distinct', [share('gpu-0', '10', '1Gi', 'a'), share('gpu-1', '10', '1Gi', 'b')]),
  { ...onNodeA('shared', ['allocation unchanged']), reservedFor: 2 },
];

describe('DRA on the simulator: the answers kube-scheduler and kube-controller-manager 1.36 gave', () => {
  let sim: DraSim | undefined;
  beforeAll(async () => {
    sim = await startDraSim();
  });
  afterAll(async () => sim?.close());

  it('allocates, rounds, makes template claims and frees them as the real control plane did', async () => {
    const observed = await draScenario(sim!.client);
    expect(observed.map((o) => o.step)).toEqual(REAL_1_36.map((o) => o.step));
    for (let i = 0; i < REAL_1_36.length; i++) expect(observed[i], `step ${REAL_1_36[i]!.step}`).toEqual(REAL_1_36[i]);
  }, 120_000);
});
