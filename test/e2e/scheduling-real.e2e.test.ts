/**
 * The scheduling scenarios of scheduling.e2e.test.ts against an unmodified kube-apiserver and
 * kube-scheduler v1.32 (the shipped scheduler configuration, extender URL rewritten), with the
 * real control plane and node agents and the simulated kubelets. The real cluster starts once
 * for the file. Skipped, with the reason in its name, where `../shared/kubernetes-1.32/` is absent.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type RealCluster, realTierSkipReason, startRealCluster } from './real-cluster.js';
import { createNamespace, schedulingScenarioTests } from './scheduling-scenarios.js';

const NS = 'scheduling';
const skip = realTierSkipReason();

describe.skipIf(skip !== undefined)(
  `scheduling on a real kube-apiserver + kube-scheduler 1.32${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let rc: RealCluster;
    beforeAll(async () => {
      rc = await startRealCluster(
        parseClusterSpec({ name: 'scheduling', nodes: [{ namePrefix: 'node', count: 2, cards: 2, memoryMiB: 8192 }] }),
      );
      await createNamespace(rc, NS);
    }, 180_000);
    afterAll(async () => rc?.close(), 60_000);

    schedulingScenarioTests(() => rc, NS);
  },
);
