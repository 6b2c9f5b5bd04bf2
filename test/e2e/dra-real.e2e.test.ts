/**
 * The simulator's DRA against the real one: the same steps (`dra-scenario.ts`) on the simulated
 * API server, scheduler and controller manager playing 1.36, and on an unmodified
 * kube-apiserver + kube-scheduler + kube-controller-manager v1.36 (`../shared/kubernetes-1.36/`,
 * no kubelet: nodes are objects, slices are published by the test), compared step by step: three
 * 30 % shares on one card, a fourth that only fits the second, a request rounded by the step
 * (8000M → 7630Mi), a template claim, a claim that fits nowhere, the claims freed when their pods
 * end, `count: 2`, two requests sharing a card and `distinctAttribute` keeping them apart; and
 * MIG partitions (KEP-4815) as the node agent publishes them, claimed by profile, never overlapping.
 * Skipped, saying why, without that directory.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../sim/kube-client.js';
import {
  type RealControlPlane,
  real136SkipReason,
  startRealControlPlane136,
} from '../support/real-control-plane-136.js';
import { type DraObservation, draMigScenario, draScenario } from './dra-scenario.js';
import { type DraSim, startDraSim } from './dra-sim.js';
import { refusals } from './dra-validation-cases.js';

const skipReason = real136SkipReason('real kube-apiserver + kube-scheduler + kube-controller-manager v1.36');
if (skipReason) console.warn(`dra-real: skipped: ${skipReason}`);

describe.skipIf(skipReason !== undefined)(
  'DRA: the simulator against kube-scheduler and kube-controller-manager 1.36',
  () => {
    let realPlane: RealControlPlane | undefined;
    let real: KubeClient;
    let sim: DraSim | undefined;

    beforeAll(async () => {
      realPlane = await startRealControlPlane136();
      real = realPlane.client;
      sim = await startDraSim();
    }, 300_000);

    afterAll(async () => {
      await sim?.close();
      await realPlane?.close();
    }, 120_000);

    it('gives the same feasibility, devices, consumedCapacity and claim lifecycle at every step', async () => {
      const [onReal, onSim] = await Promise.all([draScenario(real), draScenario(sim!.client)]);
      if (process.env['VCUDA_SHOW_OBSERVATIONS']) console.log(JSON.stringify({ onReal, onSim }, null, 1));
      expect(onSim.map((o) => o.step)).toEqual(onReal.map((o) => o.step));
      for (let i = 0; i < onReal.length; i++) {
        expect(onSim[i], `step ${onReal[i]!.step}`).toEqual(onReal[i] as DraObservation);
      }
    }, 300_000);

    it('allocates MIG partitions alike: no overlap, the same devices, the same claims left unallocated', async () => {
      const [onReal, onSim] = await Promise.all([draMigScenario(real), draMigScenario(sim!.client)]);
      if (process.env['VCUDA_SHOW_OBSERVATIONS']) console.log(JSON.stringify({ onReal, onSim }, null, 1));
      expect(onSim.map((o) => o.step)).toEqual(onReal.map((o) => o.step));
      for (let i = 0; i < onReal.length; i++) {
        expect(onSim[i], `step ${onReal[i]!.step}`).toEqual(onReal[i] as DraObservation);
      }
      // What the partitions are for: no two allocated at once overlap, on the real scheduler too.
      expect(onReal.filter((o) => o.scheduled).map((o) => o.results?.[0]?.split(' ')[1])).toEqual([
        'gpu-0-mig-3g-40gb-0',
        'gpu-0-mig-3g-40gb-4',
        'gpu-0-mig-4g-40gb-0',
        'gpu-0-mig-1g-10gb-4',
        'gpu-0-mig-7g-80gb-0',
      ]);
    }, 300_000);

    it('refuses the same bad claims, slices and classes with the same code and causes', async () => {
      const [onReal, onSim] = await Promise.all([refusals(realPlane!.url), refusals(sim!.api.url)]);
      for (let i = 0; i < onReal.length; i++) expect(onSim[i], onReal[i]!.name).toEqual(onReal[i]);
    }, 120_000);
  },
);
