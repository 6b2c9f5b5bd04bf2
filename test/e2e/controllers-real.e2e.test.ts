/**
 * The simulated controller manager against the real one: the same Deployment and Job steps on
 * the simulated API server with `sim/controllers`, and on an unmodified kube-apiserver +
 * kube-controller-manager v1.36 (`../shared/kubernetes-1.36/`, no scheduler, no kubelet; a
 * stand-in runs the pods on both), then the pod counts, ownership, ReplicaSets, revisions, and
 * Deployment and Job status compared step by step. Skipped, saying why, without that directory.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SimApiServer, startApiServer } from '../../sim/apiserver/api-server.js';
import { type SimControllerManager, startControllerManager } from '../../sim/controllers/controller-manager.js';
import { KubeClient } from '../../sim/kube-client.js';
import {
  type RealControlPlane,
  real136SkipReason,
  startRealControlPlane136,
} from '../support/real-control-plane-136.js';
import { runPods } from '../support/sim/pod-runner.js';
import { type Observation, workloadScenario } from './workload-scenario.js';

const skipReason = real136SkipReason('real kube-apiserver + kube-controller-manager v1.36');
if (skipReason) console.warn(`controllers-real: skipped: ${skipReason}`);

describe.skipIf(skipReason !== undefined)(
  'Deployments and Jobs: the simulator against kube-controller-manager 1.36',
  () => {
    let realPlane: RealControlPlane | undefined;
    let real: KubeClient;
    let api: SimApiServer;
    let controllers: SimControllerManager;
    let sim: KubeClient;

    beforeAll(async () => {
      realPlane = await startRealControlPlane136(['--no-scheduler']);
      real = realPlane.client;
      api = await startApiServer();
      sim = new KubeClient(api.url);
      controllers = startControllerManager({ client: sim });
    }, 300_000);

    afterAll(async () => {
      await controllers?.close();
      await api?.close();
      await realPlane?.close();
    }, 120_000);

    it('gives the same pods, owners, ReplicaSets and statuses at every step', async () => {
      const observe = async (client: KubeClient): Promise<Observation[]> => {
        const stop = runPods(client);
        try {
          return await workloadScenario(client);
        } finally {
          await stop();
        }
      };
      const [onReal, onSim] = await Promise.all([observe(real), observe(sim)]);
      if (process.env['VCUDA_SHOW_OBSERVATIONS']) console.log(JSON.stringify({ onReal, onSim }, null, 1));
      expect(onReal.map((o) => o.step)).toEqual(onSim.map((o) => o.step));
      for (let i = 0; i < onReal.length; i++) expect(onSim[i], `step ${onReal[i]!.step}`).toEqual(onReal[i]);
    }, 300_000);
  },
);
