/**
 * Each controller's plan carried out through the API server, as kube-controller-manager's
 * controllers write: pods and ReplicaSets created with their controller reference (so admission
 * webhooks see them as any pod), scaled and deleted, statuses written only when they change,
 * and the Events `kubectl describe` shows (SuccessfulCreate, ScalingReplicaSet, Completed, …).
 */
import { randomBytes } from 'node:crypto';
import { KubeApiError, type KubeClient, type KubeObj } from '../kube-client.js';
import { planDeployment, REVISION } from './deployment-sync.js';
import { type InformerCache, KIND_PATHS, objectPath, type WatchedKind } from './informer-cache.js';
import { JOB_TRACKING_FINALIZER, planJob } from './job-sync.js';
import { planReplicaSet } from './replica-set-sync.js';
import { canonicalJson, controllerReference, type PodTemplate } from './workload-objects.js';

export type SyncContext = {
  client: KubeClient;
  cache: InformerCache;
  now: () => number;
};

const COMPONENTS: Record<string, string> = {
  ReplicaSet: 'replicaset-controller',
  Deployment: 'deployment-controller',
  Job: 'job-controller',
};

/** A core/v1 Event about `obj`, as an EventRecorder writes it; a failed write is not the sync's failure. */
export async function recordEvent(
  ctx: SyncContext,
  obj: KubeObj,
  ref: { apiVersion: string; kind: string },
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
): Promise<void> {
  const ns = obj.metadata.namespace ?? 'default';
  const time = new Date(ctx.now()).toISOString();
  const component = COMPONENTS[ref.kind] ?? 'controller-manager';
  await ctx.client
    .create(`/api/v1/namespaces/${encodeURIComponent(ns)}/events`, {
      metadata: { name: `${obj.metadata.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
      involvedObject: { ...ref, namespace: ns, name: obj.metadata.name, uid: obj.metadata.uid },
      reason,
      message,
      type,
      source: { component },
      firstTimestamp: time,
      lastTimestamp: time,
      count: 1,
      reportingComponent: component,
    })
    .catch(() => undefined);
}

/** Writes `status` when it differs from the cached one; the object written goes into the cache. */
async function writeStatus(ctx: SyncContext, kind: WatchedKind, obj: KubeObj, status: unknown): Promise<KubeObj> {
  if (canonicalJson(obj['status'] ?? {}) === canonicalJson(status)) return obj;
  const written = await ctx.client.request<KubeObj>('PUT', `${objectPath(kind, obj)}/status`, { ...obj, status });
  ctx.cache.store(kind, written);
  return written;
}

/** A pod from `template`, owned by `owner`; its name is generated from `prefix`. */
async function createPod(
  ctx: SyncContext,
  owner: KubeObj,
  ref: { apiVersion: string; kind: string },
  template: PodTemplate | undefined,
  finalizers: string[] = [],
): Promise<KubeObj> {
  const ns = owner.metadata.namespace ?? 'default';
  const meta = template?.metadata ?? {};
  const pod = await ctx.client.create(KIND_PATHS.pods.collection(encodeURIComponent(ns)), {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `${owner.metadata.name}-`,
      namespace: ns,
      ...(meta.labels ? { labels: meta.labels } : {}),
      ...(meta.annotations ? { annotations: meta.annotations } : {}),
      ...(finalizers.length ? { finalizers } : {}),
      ownerReferences: [controllerReference(owner, ref.apiVersion, ref.kind)],
    },
    spec: template?.spec ?? {},
  });
  ctx.cache.store('pods', pod);
  await recordEvent(ctx, owner, ref, 'Normal', 'SuccessfulCreate', `Created pod: ${pod.metadata.name}`);
  return pod;
}

async function deletePod(ctx: SyncContext, owner: KubeObj, ref: { apiVersion: string; kind: string }, pod: KubeObj) {
  const gone = await ctx.client.delete(objectPath('pods', pod)).catch((e: unknown) => {
    if (e instanceof KubeApiError && e.code === 404) return undefined;
    throw e;
  });
  if (gone?.metadata.deletionTimestamp) ctx.cache.store('pods', gone);
  else ctx.cache.forget('pods', pod);
  await recordEvent(ctx, owner, ref, 'Normal', 'SuccessfulDelete', `Deleted pod: ${pod.metadata.name}`);
}

/**
 * A pod a refusal (admission, quota) kept from being created is reported as kube-controller-manager
 * does (a FailedCreate event), then the error goes up so the owner is retried after a backoff.
 */
async function createPods(
  ctx: SyncContext,
  owner: KubeObj,
  ref: { apiVersion: string; kind: string },
  count: number,
  create: () => Promise<KubeObj>,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    try {
      await create();
    } catch (e) {
      await recordEvent(ctx, owner, ref, 'Warning', 'FailedCreate', `Error creating: ${(e as Error).message}`);
      throw e;
    }
  }
}

const RS_REF = { apiVersion: 'apps/v1', kind: 'ReplicaSet' };
const DEPLOYMENT_REF = { apiVersion: 'apps/v1', kind: 'Deployment' };
const JOB_REF = { apiVersion: 'batch/v1', kind: 'Job' };

export async function syncReplicaSet(ctx: SyncContext, rs: KubeObj, pods: readonly KubeObj[]): Promise<void> {
  const plan = planReplicaSet(rs, pods);
  const ref = controllerReference(rs, RS_REF.apiVersion, RS_REF.kind);
  for (const pod of plan.adopt) {
    const adopted = await ctx.client.strategicPatch(objectPath('pods', pod), {
      metadata: { ownerReferences: [ref], uid: pod.metadata.uid },
    });
    ctx.cache.store('pods', adopted);
  }
  const template = (rs['spec'] as { template?: PodTemplate } | undefined)?.template;
  try {
    await createPods(ctx, rs, RS_REF, plan.create, () => createPod(ctx, rs, RS_REF, template));
    for (const pod of plan.remove) await deletePod(ctx, rs, RS_REF, pod);
  } finally {
    await writeStatus(ctx, 'replicasets', rs, plan.status).catch(() => undefined);
  }
}

export async function syncDeployment(ctx: SyncContext, d: KubeObj, replicaSets: readonly KubeObj[]): Promise<void> {
  const plan = planDeployment(d, replicaSets, ctx.now());
  if (plan.create) {
    const rs = await ctx.client.create(
      KIND_PATHS.replicasets.collection(d.metadata.namespace ?? 'default'),
      plan.create,
    );
    ctx.cache.store('replicasets', rs);
    const replicas = (rs['spec'] as { replicas?: number }).replicas ?? 0;
    await recordEvent(
      ctx,
      d,
      DEPLOYMENT_REF,
      'Normal',
      'ScalingReplicaSet',
      `Scaled up replica set ${rs.metadata.name} from 0 to ${replicas}`,
    );
  }
  for (const { rs, replicas, annotations } of plan.scale) {
    const from = (rs['spec'] as { replicas?: number }).replicas ?? 0;
    const patch = { metadata: { annotations }, spec: { replicas } };
    ctx.cache.store('replicasets', await ctx.client.mergePatch(objectPath('replicasets', rs), patch));
    if (from !== replicas) {
      const how = replicas > from ? 'up' : 'down';
      await recordEvent(
        ctx,
        d,
        DEPLOYMENT_REF,
        'Normal',
        'ScalingReplicaSet',
        `Scaled ${how} replica set ${rs.metadata.name} from ${from} to ${replicas}`,
      );
    }
  }
  for (const rs of plan.remove) {
    await ctx.client.delete(objectPath('replicasets', rs)).catch(() => undefined);
    ctx.cache.forget('replicasets', rs);
  }
  let current = d;
  if (d.metadata.annotations?.[REVISION] !== plan.revision) {
    current = await ctx.client.mergePatch(objectPath('deployments', d), {
      metadata: { annotations: { [REVISION]: plan.revision } },
    });
    ctx.cache.store('deployments', current);
  }
  await writeStatus(ctx, 'deployments', current, plan.status);
}

export async function syncJob(ctx: SyncContext, job: KubeObj, pods: readonly KubeObj[]): Promise<void> {
  const plan = planJob(job, pods, ctx.now());
  const wasFinished = finished(job);
  // The status records finished pods before their finalizers go: a pod is never lost uncounted.
  const written = await writeStatus(ctx, 'jobs', job, plan.status);
  for (const pod of plan.release) {
    const finalizers = ((pod.metadata['finalizers'] as string[] | undefined) ?? []).filter(
      (f) => f !== JOB_TRACKING_FINALIZER,
    );
    const released = await ctx.client
      .mergePatch(objectPath('pods', pod), { metadata: { finalizers } })
      .catch(() => undefined);
    if (released) ctx.cache.store('pods', released);
  }
  const template = (job['spec'] as { template?: PodTemplate } | undefined)?.template;
  await createPods(ctx, job, JOB_REF, plan.create, () =>
    createPod(ctx, job, JOB_REF, template, [JOB_TRACKING_FINALIZER]),
  );
  for (const pod of plan.remove) await deletePod(ctx, job, JOB_REF, pod);
  const nowFinished = finished(written);
  if (nowFinished && !wasFinished) {
    const failed = nowFinished === 'Failed';
    const condition = (
      (written['status'] as { conditions?: { type: string; reason: string; message: string }[] }).conditions ?? []
    ).find((c) => c.type === nowFinished);
    await recordEvent(
      ctx,
      written,
      JOB_REF,
      failed ? 'Warning' : 'Normal',
      failed ? (condition?.reason ?? 'Failed') : 'Completed',
      failed ? (condition?.message ?? 'Job failed') : 'Job completed',
    );
  }
}

function finished(job: KubeObj): 'Complete' | 'Failed' | undefined {
  const conditions =
    (job['status'] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? [];
  return conditions.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True')?.type as
    | 'Complete'
    | 'Failed'
    | undefined;
}
