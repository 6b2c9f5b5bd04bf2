/**
 * The scheduling scenarios on the simulator (the same steps run against a real kube-apiserver and
 * kube-scheduler in scheduling-real.e2e.test.ts): identical pods on one node, a control-plane
 * restart mid-burst, a pod's whole life. The scheduler keeps the shipped configuration's backoff.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { createNamespace, localClusterRig, type Rig, schedulingScenarioTests } from './scheduling-scenarios.js';

const NS = 'scheduling';

describe('scheduling on the simulator', () => {
  let lc: LocalCluster;
  let rig: Rig;
  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'scheduling',
        nodes: [{ namePrefix: 'node', count: 2, cards: 2, memoryMiB: 8192 }],
      }),
      logLevel: (process.env['VCUDA_TEST_LOG_LEVEL'] as 'info' | undefined) ?? 'silent',
    });
    rig = localClusterRig(lc);
    await createNamespace(rig, NS);
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  schedulingScenarioTests(() => rig, NS);
});
