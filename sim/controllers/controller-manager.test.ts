/**
 * The simulated controller manager over the simulated API server, with a stand-in kubelet that
 * runs every pod it sees (Running and Ready, or Succeeded for Job pods): replicas
 * kept, a deleted pod replaced, a rollout that never drops below maxUnavailable, Job completions
 * with parallelism, garbage collection by owner references, and orphaning on request.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runPods } from '../../test/support/sim/pod-runner.js';
import { type SimApiServer, startApiServer } from '../apiserver/api-server.js';
import { KubeClient, podPath } from '../kube-client.js';
import { type SimControllerManager, startControllerManager } from './controller-manager.js';
import { controllerOf } from './workload-objects.js';

const APPS = '/apis/apps/v1/namespaces/default';
const BATCH = '/apis/batch/v1/namespaces/default';

function deployment(name: string, replicas: number, image = 'cuda:1') {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'main', image }] } },
    },
  };
}

function job(name: string, completions: number, parallelism: number) {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name },
    spec: {
      completions,
      parallelism,
      template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'cuda:1' }] } },
    },
  };
}

const activePods = async (client: KubeClient, prefix: string) =>
  (await client.list('/api/v1/namespaces/default/pods')).items.filter(
    (p) => p.metadata.name.startsWith(prefix) && !p.metadata.deletionTimestamp,
  );

describe('simulated controller manager', () => {
  let api: SimApiServer;
  let client: KubeClient;
  let controllers: SimControllerManager;
  let stopKubelet: () => Promise<void>;
  let maxUnready = 0;

  beforeEach(async () => {
    api = await startApiServer();
    client = new KubeClient(api.url);
    controllers = startControllerManager({ client });
    maxUnready = 0;
    stopKubelet = runPods(client, (pods) => {
      const web = pods.filter((p) => p.metadata.name.startsWith('web-'));
      const ready = web.filter((p) =>
        ((p['status'] as { conditions?: { type: string; status: string }[] }).conditions ?? []).some(
          (c) => c.type === 'Ready' && c.status === 'True' && !p.metadata.deletionTimestamp,
        ),
      ).length;
      if (web.length >= 4) maxUnready = Math.max(maxUnready, 4 - ready);
    });
  });
  afterEach(async () => {
    await stopKubelet();
    await controllers.close();
    await api.close();
  });

  it('keeps a Deployment at its replicas through scaling and a deleted pod, each pod owned by its ReplicaSet', async () => {
    await client.create(`${APPS}/deployments`, deployment('web', 3));
    await expect.poll(async () => (await activePods(client, 'web-')).length, { timeout: 10_000 }).toBe(3);
    const [rs] = (await client.list(`${APPS}/replicasets`)).items;
    expect(controllerOf(rs!)).toMatchObject({ kind: 'Deployment', name: 'web', controller: true });
    for (const p of await activePods(client, 'web-')) expect(controllerOf(p)?.uid).toBe(rs!.metadata.uid);

    await client.mergePatch(`${APPS}/deployments/web/scale`, { spec: { replicas: 5 } });
    await expect.poll(async () => (await activePods(client, 'web-')).length, { timeout: 10_000 }).toBe(5);
    const victim = (await activePods(client, 'web-'))[0]!;
    await client.delete(podPath('default', victim.metadata.name));
    await expect
      .poll(
        async () => (await activePods(client, 'web-')).filter((p) => p.metadata.name !== victim.metadata.name).length,
        {
          timeout: 10_000,
        },
      )
      .toBe(5);
    await expect
      .poll(async () => (await client.get(`${APPS}/deployments/web`))['status'], { timeout: 10_000 })
      .toMatchObject({
        replicas: 5,
        readyReplicas: 5,
        availableReplicas: 5,
        updatedReplicas: 5,
        observedGeneration: 2,
      });
  });

  it('rolls a changed template out within maxUnavailable and keeps the old ReplicaSet at zero', async () => {
    await client.create(`${APPS}/deployments`, deployment('web', 4));
    await expect
      .poll(async () => (await client.get(`${APPS}/deployments/web`))['status'], { timeout: 10_000 })
      .toMatchObject({ readyReplicas: 4 });
    maxUnready = 0;
    await client.strategicPatch(`${APPS}/deployments/web`, {
      spec: { template: { spec: { containers: [{ name: 'main', image: 'cuda:2' }] } } },
    });
    await expect
      .poll(
        async () => {
          const pods = await activePods(client, 'web-');
          const images = pods.map((p) => (p['spec'] as { containers: { image: string }[] }).containers[0]!.image);
          return { count: pods.length, updated: images.filter((i) => i === 'cuda:2').length };
        },
        { timeout: 15_000 },
      )
      .toEqual({ count: 4, updated: 4 });
    // 25 % of 4: at most one pod short of the replicas at any time.
    expect(maxUnready).toBeLessThanOrEqual(1);
    const sets = (await client.list(`${APPS}/replicasets`)).items;
    expect(sets.map((s) => (s['spec'] as { replicas: number }).replicas).sort()).toEqual([0, 4]);
    const d = await client.get(`${APPS}/deployments/web`);
    expect(d.metadata.annotations?.['deployment.kubernetes.io/revision']).toBe('2');
  });

  it('runs a Job to its completions, parallelism pods at a time, and counts each pod once', async () => {
    await client.create(`${BATCH}/jobs`, job('batch', 5, 2));
    await expect
      .poll(async () => (await client.get(`${BATCH}/jobs/batch`))['status'], { timeout: 15_000 })
      .toMatchObject({
        succeeded: 5,
        conditions: expect.arrayContaining([expect.objectContaining({ type: 'Complete' })]),
      });
    const j = await client.get(`${BATCH}/jobs/batch`);
    expect((j['status'] as { failed?: number }).failed ?? 0).toBe(0);
    const pods = (await client.list('/api/v1/namespaces/default/pods')).items;
    expect(pods.length).toBe(5);
    for (const p of pods) expect(p.metadata['finalizers'] ?? []).toEqual([]);
  });

  it('deletes the pods of a deleted Deployment and keeps those of one deleted with orphaning', async () => {
    await client.create(`${APPS}/deployments`, deployment('web', 2));
    await client.create(`${APPS}/deployments`, deployment('keep', 2));
    await expect.poll(async () => (await activePods(client, '')).length, { timeout: 10_000 }).toBe(4);
    await client.request('DELETE', `${APPS}/deployments/web`, { propagationPolicy: 'Background' });
    await client.request('DELETE', `${APPS}/deployments/keep`, { propagationPolicy: 'Orphan' });
    await expect.poll(async () => (await activePods(client, 'web-')).length, { timeout: 10_000 }).toBe(0);
    await expect.poll(async () => (await client.list(`${APPS}/deployments`)).items.length, { timeout: 10_000 }).toBe(0);
    const kept = await client.list(`${APPS}/replicasets`);
    expect(kept.items.map((s) => s.metadata.name)).toEqual([expect.stringMatching(/^keep-/)]);
    expect(controllerOf(kept.items[0]!)).toBeUndefined();
    expect((await activePods(client, 'keep-')).length).toBe(2);
  });

  it('refuses a Deployment whose selector does not select its template, naming the field', async () => {
    const bad = deployment('bad', 1);
    bad.spec.template.metadata.labels = { app: 'other' };
    await expect(client.create(`${APPS}/deployments`, bad)).rejects.toThrow(
      /spec\.template\.metadata\.labels: Invalid value: .*`selector` does not match template `labels`/,
    );
  });
});
