/**
 * The scheduling scenarios of scheduling.e2e.test.ts against an unmodified kube-apiserver and
 * kube-scheduler v1.32 (the shipped scheduler configuration, extender URL rewritten), with the
 * real control plane and node agents and the simulated kubelets. The real cluster starts once
 * for the file. Skipped, with the reason in its name, where `../shared/kubernetes-1.32/` is absent.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type RealCluster, realTierSkipReason, startRealCluster } from './real-cluster.js';
import {
  createNamespace,
  emptyNamespace,
  identicalPodsOnOneNode,
  podLife,
  type Rig,
  restartMidBurst,
} from './scheduling-scenarios.js';

const NS = 'scheduling';
const skip = realTierSkipReason();

describe.skipIf(skip !== undefined)(
  `scheduling on a real kube-apiserver + kube-scheduler 1.32${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let rc: RealCluster;
    let rig: Rig;
    beforeAll(async () => {
      rc = await startRealCluster(
        parseClusterSpec({ name: 'scheduling', nodes: [{ namePrefix: 'node', count: 2, cards: 2, memoryMiB: 8192 }] }),
      );
      rig = {
        client: rc.client,
        db: rc.db,
        nodeNames: rc.nodes.map((n) => n.name),
        killControlPlane: () => rc.killControlPlane(),
        startControlPlane: () => rc.startControlPlane(),
      };
      await createNamespace(rig, NS);
    }, 180_000);
    afterAll(async () => rc?.close(), 60_000);
    afterEach(async () => emptyNamespace(rig, NS), 60_000);

    it('places identical pods on one node, each with its own share', async () => {
      await identicalPodsOnOneNode(rig, NS, 8);
    }, 120_000);

    it('binds the waiting pods within seconds of a control-plane restart with cards free', async () => {
      expect(await restartMidBurst(rig, NS, 4, 6)).toBeLessThan(15);
    }, 120_000);

    it("runs a pod's whole life, the simulated kubelet's final delete included", async () => {
      await podLife(rig, NS);
    }, 60_000);
  },
);
