/**
 * The preemption scenario of preemption.e2e.test.ts against an unmodified kube-apiserver and
 * kube-scheduler v1.32 with the shipped scheduler configuration (preemptVerb: preempt): the real
 * kube-scheduler counts vcuda-core per node and proposes the two newest pods, which sit on
 * different cards; vcuda's preempt verb answers the two pods of one card, and kube-scheduler
 * evicts those; with a PodDisruptionBudget over the other cards' pods, the unprotected card is
 * the one emptied. Skipped, with the reason in its name, where `../shared/kubernetes-1.32/` is absent.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { preemptAroundBudget, preemptOneCard } from './preemption-scenario.js';
import { type RealCluster, realTierSkipReason, startRealCluster } from './real-cluster.js';
import { createNamespace, emptyNamespace } from './scheduling-scenarios.js';

const NS = 'preemption';
const skip = realTierSkipReason();

describe.skipIf(skip !== undefined)(
  `preemption on a real kube-apiserver + kube-scheduler 1.32${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let rc: RealCluster;
    beforeAll(async () => {
      rc = await startRealCluster(parseClusterSpec({ name: 'preemption', nodes: [{ count: 1, cards: 8 }] }));
      await createNamespace(rc, NS);
    }, 180_000);
    afterAll(async () => rc?.close(), 60_000);

    it('evicts exactly the two pods of one card for a whole-card pod of higher priority', async () => {
      await preemptOneCard(rc, NS, rc.nodeNames[0]!, 8, rc.controlPlane()!.url);
    }, 240_000);

    it('spares the pods a PodDisruptionBudget protects, choosing another card', async () => {
      await emptyNamespace(rc, NS);
      await preemptAroundBudget(rc, NS, rc.nodeNames[0]!, 8);
    }, 240_000);
  },
);
