/**
 * One Deployment's and one Job's life, the same steps for any API server with controllers behind
 * it (the simulator's or kube-controller-manager), observed after each step settles: active pods,
 * who owns them, the ReplicaSets with their sizes and revisions, and the Deployment's and Job's
 * status, in a form two clusters can be compared by (no names, uids or times).
 */
import type { KubeClient, KubeObj } from '../../sim/kube-client.js';

const NS = 'default';
const APPS = `/apis/apps/v1/namespaces/${NS}`;
const BATCH = `/apis/batch/v1/namespaces/${NS}`;

export type Observation = {
  step: string;
  activePods: number;
  podsOwnedByReplicaSets: number;
  podImages: string[];
  replicaSets: { revision: string; desired: number; current: number; ownedByDeployment: boolean }[];
  deployment: Record<string, unknown> | null;
  job: Record<string, unknown> | null;
  failingJob: Record<string, unknown> | null;
};

function jobView(job: KubeObj, pods: readonly KubeObj[]): Record<string, unknown> {
  const s = statusOf(job);
  const own = pods.filter(
    (p) => (p.metadata['ownerReferences'] as { uid: string }[] | undefined)?.[0]?.uid === job.metadata.uid,
  );
  return {
    succeeded: s['succeeded'] ?? 0,
    failed: s['failed'] ?? 0,
    active: s['active'] ?? 0,
    conditions: (s.conditions ?? []).map((c) => `${c.type}=${c.status}`).sort(),
    reasons: (s.conditions ?? []).map((c) => (c as { reason?: string }).reason).sort(),
    pods: own.length,
  };
}

type Status = Record<string, number | undefined> & { conditions?: { type: string; status: string }[] };

const statusOf = (o: KubeObj | undefined) => (o?.['status'] ?? {}) as Status;
const controller = (o: KubeObj) =>
  ((o.metadata['ownerReferences'] as { kind: string; controller?: boolean }[] | undefined) ?? []).find(
    (r) => r.controller,
  );

async function getOrUndefined(client: KubeClient, path: string): Promise<KubeObj | undefined> {
  return client.get(path).catch(() => undefined);
}

const isReady = (p: KubeObj) =>
  ((p['status'] as { conditions?: { type: string; status: string }[] }).conditions ?? []).some(
    (c) => c.type === 'Ready' && c.status === 'True',
  );

async function activePods(client: KubeClient): Promise<KubeObj[]> {
  const pods = (await client.list(`/api/v1/namespaces/${NS}/pods`)).items;
  return pods.filter((p) => !p.metadata.deletionTimestamp && controller(p)?.kind !== 'Job');
}

async function observe(client: KubeClient, step: string): Promise<Observation> {
  const pods = (await client.list(`/api/v1/namespaces/${NS}/pods`)).items;
  const active = pods.filter((p) => !p.metadata.deletionTimestamp && controller(p)?.kind !== 'Job');
  const sets = (await client.list(`${APPS}/replicasets`)).items;
  const d = await getOrUndefined(client, `${APPS}/deployments/web`);
  const job = await getOrUndefined(client, `${BATCH}/jobs/batch`);
  const failing = await getOrUndefined(client, `${BATCH}/jobs/failing`);
  const jobPods = pods.filter((p) => controller(p)?.kind === 'Job');
  const ds = statusOf(d);
  const js = statusOf(job);
  return {
    step,
    activePods: active.length,
    podsOwnedByReplicaSets: active.filter((p) => controller(p)?.kind === 'ReplicaSet').length,
    podImages: active.map((p) => (p['spec'] as { containers: { image: string }[] }).containers[0]!.image).sort(),
    replicaSets: sets
      .map((s) => ({
        revision: s.metadata.annotations?.['deployment.kubernetes.io/revision'] ?? '',
        desired: (s['spec'] as { replicas: number }).replicas,
        current: statusOf(s)['replicas'] ?? 0,
        ownedByDeployment: controller(s)?.kind === 'Deployment',
      }))
      .sort((a, b) => a.revision.localeCompare(b.revision)),
    deployment: d
      ? {
          revision: d.metadata.annotations?.['deployment.kubernetes.io/revision'],
          replicas: ds['replicas'] ?? 0,
          updatedReplicas: ds['updatedReplicas'] ?? 0,
          readyReplicas: ds['readyReplicas'] ?? 0,
          availableReplicas: ds['availableReplicas'] ?? 0,
          conditions: (ds.conditions ?? []).map((c) => `${c.type}=${c.status}`).sort(),
        }
      : null,
    failingJob: failing ? jobView(failing, jobPods) : null,
    job: job
      ? {
          succeeded: js['succeeded'] ?? 0,
          failed: js['failed'] ?? 0,
          active: js['active'] ?? 0,
          conditions: (js.conditions ?? []).map((c) => `${c.type}=${c.status}`).sort(),
          pods: jobPods.length,
          trackingFinalizers: jobPods.filter((p) =>
            ((p.metadata['finalizers'] as string[] | undefined) ?? []).includes('batch.kubernetes.io/job-tracking'),
          ).length,
        }
      : null,
  };
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The Deployment has settled at `replicas`: its status says every pod is updated, ready and
 * available, and exactly that many pods are there and ready (a status may lag its pods).
 */
async function deploymentSettled(client: KubeClient, replicas: number): Promise<boolean> {
  const d = await client.get(`${APPS}/deployments/web`);
  const s = statusOf(d);
  return (
    (s['observedGeneration'] ?? 0) >= Number(d.metadata['generation'] ?? 0) &&
    s['replicas'] === replicas &&
    s['updatedReplicas'] === replicas &&
    s['availableReplicas'] === replicas &&
    s['readyReplicas'] === replicas &&
    (await activePods(client)).filter(isReady).length === replicas
  );
}

function deployment(replicas: number) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas,
      selector: { matchLabels: { app: 'web' } },
      template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'main', image: 'cuda:1' }] } },
    },
  };
}

const job = {
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name: 'batch' },
  spec: {
    completions: 4,
    parallelism: 2,
    template: { spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'cuda:1' }] } },
  },
};

/** Changes the template's image and waits until every pod runs it and the Deployment has settled. */
async function rollTo(client: KubeClient, image: string): Promise<void> {
  await client.strategicPatch(`${APPS}/deployments/web`, {
    spec: { template: { spec: { containers: [{ name: 'main', image }] } } },
  });
  await until(`the rollout of ${image}`, async () => {
    const images = (await activePods(client)).map(
      (p) => (p['spec'] as { containers: { image: string }[] }).containers[0]!.image,
    );
    return images.every((i) => i === image) && (await deploymentSettled(client, 5));
  });
}

/** Runs every step on `client` and returns what was seen after each. */
export async function workloadScenario(client: KubeClient): Promise<Observation[]> {
  const seen: Observation[] = [];
  await client.create(`${APPS}/deployments`, deployment(3));
  await until('3 replicas', () => deploymentSettled(client, 3));
  seen.push(await observe(client, 'created with 3 replicas'));

  await client.mergePatch(`${APPS}/deployments/web/scale`, { spec: { replicas: 5 } });
  await until('5 replicas', () => deploymentSettled(client, 5));
  seen.push(await observe(client, 'scaled to 5'));

  const victim = (await activePods(client))[0]!;
  await client.delete(`/api/v1/namespaces/${NS}/pods/${victim.metadata.name}`);
  await until('the deleted pod replaced', async () => {
    const names = (await activePods(client)).map((p) => p.metadata.name);
    return names.length === 5 && !names.includes(victim.metadata.name) && (await deploymentSettled(client, 5));
  });
  seen.push(await observe(client, 'a pod deleted'));

  await rollTo(client, 'cuda:2');
  seen.push(await observe(client, 'rolled out a new image'));

  // As `kubectl rollout undo` does: the first template again, so its ReplicaSet comes back as revision 3.
  await rollTo(client, 'cuda:1');
  seen.push(await observe(client, 'rolled back to the first image'));

  await client.create(`${BATCH}/jobs`, job);
  await until('the Job complete', async () =>
    (statusOf(await client.get(`${BATCH}/jobs/batch`)).conditions ?? []).some((c) => c.type === 'Complete'),
  );
  seen.push(await observe(client, 'a Job of 4 completions, 2 at a time'));

  // Every pod of this one fails: the second failure is past its backoffLimit of 1.
  await client.create(`${BATCH}/jobs`, {
    ...job,
    metadata: { name: 'failing' },
    spec: { ...job.spec, completions: 1, parallelism: 1, backoffLimit: 1 },
  });
  await until(
    'the failing Job failed',
    async () => (statusOf(await client.get(`${BATCH}/jobs/failing`)).conditions ?? []).some((c) => c.type === 'Failed'),
    90_000,
  );
  seen.push(await observe(client, 'a Job past its backoff limit'));

  await client.request('DELETE', `${APPS}/deployments/web`, { propagationPolicy: 'Background' });
  await client.request('DELETE', `${BATCH}/jobs/batch`, { propagationPolicy: 'Background' });
  await client.request('DELETE', `${BATCH}/jobs/failing`, { propagationPolicy: 'Background' });
  await until('everything collected', async () => {
    const pods = (await client.list(`/api/v1/namespaces/${NS}/pods`)).items;
    const sets = (await client.list(`${APPS}/replicasets`)).items;
    return pods.length === 0 && sets.length === 0;
  });
  seen.push(await observe(client, 'deleted with background propagation'));
  return seen;
}
