/**
 * The simulator as a Kubernetes 1.32 API server: the control plane registers its webhooks with
 * matchConditions, and the API server evaluates them (CEL) as kube-apiserver does, so pods without
 * vcuda resources never reach the webhooks and vcuda's own components' annotation writes are not
 * validated, while a user's change of a knob still is (and is refused).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { vcudaAnnotations } from '../../contract/index.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { admissionReviews, gpuPod } from './e2e-helpers.js';

const NS = 'cel';

describe('a simulated 1.32 API server evaluating vcuda webhooks matchConditions', () => {
  let lc: LocalCluster;

  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({ name: 'cel', nodes: [{ namePrefix: 'node', count: 1, cards: 2, memoryMiB: 16384 }] }),
      logLevel: 'silent',
      kubernetesVersion: '1.32',
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  const reviews = (hook: 'mutate' | 'validate') => admissionReviews(lc.url, hook);
  const counts = async () => ({ mutate: await reviews('mutate'), validate: await reviews('validate') });

  it('is registered with matchConditions, as on any server from 1.28', async () => {
    const list = await lc.client.list('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations');
    const hooks = list.items.flatMap((c) => (c['webhooks'] as { matchConditions?: unknown[] }[] | undefined) ?? []);
    expect(hooks.length).toBe(1);
    expect(hooks[0]?.matchConditions).toEqual([expect.objectContaining({ name: 'requests-vcuda-resources' })]);
  });

  it('sends no pod without vcuda resources to the webhooks', async () => {
    const before = await counts();
    const plain = gpuPod('plain', 1);
    plain.spec.containers[0]!.resources = { limits: { cpu: '1' } } as never;
    await lc.client.create(podPath(NS), plain);
    expect(await counts()).toEqual(before);
  });

  it("validates a GPU pod's creation and a user's knob change, but not the agent's own annotation", async () => {
    const before = await counts();
    await lc.client.create(podPath(NS), gpuPod('gpu', 20, 1024));
    expect(await counts()).toEqual({ mutate: before.mutate + 1, validate: before.validate + 1 });
    await expect
      .poll(
        async () => {
          const pod: KubeObj = await lc.client.get(podPath(NS, 'gpu'));
          const running = (pod.status as { phase?: string } | undefined)?.phase === 'Running';
          return running && Boolean(pod.metadata.annotations?.[vcudaAnnotations.allocatedAt]);
        },
        { timeout: 30_000 },
      )
      .toBe(true);
    // The agent wrote its annotation as a component, keeping every knob: no review.
    expect(await reviews('validate')).toBe(before.validate + 1);
    const knob = { metadata: { annotations: { 'nvidia.com/vcuda-core-limit': '50' } } };
    await expect(lc.client.mergePatch(podPath(NS, 'gpu'), knob)).rejects.toThrow('cannot change from');
    expect(await reviews('validate')).toBe(before.validate + 2);
  }, 60_000);
});
