/**
 * The scheduling scenarios of scheduling.e2e.test.ts against an unmodified kube-apiserver and
 * kube-scheduler v1.32 (the shipped scheduler configuration, extender URL rewritten), with the
 * real control plane and node agents and the simulated kubelets. The real cluster starts once
 * for the file. Skipped, with the reason in its name, where `../shared/kubernetes-1.32/` is absent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { vcudaAnnotations } from '../../contract/index.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { admissionReviews } from './e2e-helpers.js';
import { type RealCluster, realTierSkipReason, startRealCluster } from './real-cluster.js';
import { createNamespace, schedulingScenarioTests, sharePod } from './scheduling-scenarios.js';

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

    it("validates no update of vcuda's own components that keeps the user knobs: the API server skips the call", async () => {
      const reviews = () => admissionReviews(rc.controlPlane()!.url, 'validate');
      await rc.client.create(podPath(NS), sharePod('quiet', 30, 1024));
      // Settled first: kube-apiserver runs admission again when a patch meets a pod another writer
      // (the kubelet's status, the agent's annotation) has just changed, which would count twice.
      await expect
        .poll(
          async () => {
            const pod = await rc.client.get(podPath(NS, 'quiet'));
            const running = (pod.status as { phase?: string } | undefined)?.phase === 'Running';
            return running && Boolean(pod.metadata.annotations?.[vcudaAnnotations.allocatedAt]);
          },
          { timeout: 30_000 },
        )
        .toBe(true);
      const before = await reviews();
      // The admin is one of the components here (they all use its certificate): its note is not validated.
      await rc.client.mergePatch(podPath(NS, 'quiet'), { metadata: { annotations: { 'example.com/note': 'x' } } });
      expect(await reviews()).toBe(before);
      // A knob change by the same user is, and is refused.
      const knob = { metadata: { annotations: { 'nvidia.com/vcuda-core-limit': '50' } } };
      await expect(rc.client.mergePatch(podPath(NS, 'quiet'), knob)).rejects.toThrow('cannot change from');
      expect(await reviews()).toBe(before + 1);
    }, 60_000);
  },
);
