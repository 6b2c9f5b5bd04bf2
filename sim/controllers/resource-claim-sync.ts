/**
 * kube-controller-manager's resourceclaim controller, as the simulator needs it (behaviour read
 * from `pkg/controller/resourceclaim` and checked against v1.36):
 * - a pod's `spec.resourceClaims[].resourceClaimTemplateName` becomes a claim named
 *   `<pod>-<claim>-<5 random>` (both parts cut in proportion past 57 characters), owned by the pod
 *   (a controller reference; 1.36 sets no blockOwnerDeletion), annotated `resource.kubernetes.io/pod-claim-name`, with the
 *   template's labels, annotations and spec; the pod's `status.resourceClaimStatuses` names it;
 * - a claim's `reservedFor` loses pods that are gone, replaced or done (terminal phase, or deleted
 *   before being scheduled); with no consumer left its allocation is cleared in the same status
 *   update, then the scheduler's delete-protection finalizer is removed; a deleted claim nobody
 *   uses is released the same way; an unallocated claim that keeps the finalizer (a PreBind whose
 *   status write was refused) keeps it, as upstream's does;
 * - a claim made for a pod is deleted once unreserved and its pod is done or gone.
 */
import { KubeApiError, type KubeObj } from '../kube-client.js';
import { KIND_PATHS, objectPath } from './informer-cache.js';
import type { SyncContext } from './workload-syncs.js';

export const POD_CLAIM_NAME_ANNOTATION = 'resource.kubernetes.io/pod-claim-name';
const CLAIM_FINALIZER = 'resource.kubernetes.io/delete-protection';

type PodClaim = { name: string; resourceClaimName?: string; resourceClaimTemplateName?: string };
type ClaimStatus = { name: string; resourceClaimName?: string | null };
type Consumer = { resource?: string; apiGroup?: string; name: string; uid: string };
type OwnerRef = { apiVersion?: string; kind?: string; name: string; uid: string; controller?: boolean };

const podClaimsOf = (pod: KubeObj) =>
  (pod['spec'] as { resourceClaims?: PodClaim[] } | undefined)?.resourceClaims ?? [];
const claimStatusesOf = (pod: KubeObj) =>
  (pod['status'] as { resourceClaimStatuses?: ClaimStatus[] } | undefined)?.resourceClaimStatuses ?? [];
const phaseOf = (pod: KubeObj) => (pod['status'] as { phase?: string } | undefined)?.phase;
const nodeOf = (pod: KubeObj) => (pod['spec'] as { nodeName?: string } | undefined)?.nodeName;

/** Whether none of the pod's containers runs or ever will: a terminal phase, or deleted before being scheduled. */
export function isPodDone(pod: KubeObj): boolean {
  const phase = phaseOf(pod);
  return phase === 'Succeeded' || phase === 'Failed' || (!!pod.metadata.deletionTimestamp && !nodeOf(pod));
}

/** The pod a claim was made for (its controller reference to a v1 Pod). */
export function owningPod(claim: KubeObj): OwnerRef | undefined {
  const refs = (claim.metadata['ownerReferences'] ?? []) as OwnerRef[];
  return refs.find((r) => r.controller === true && r.apiVersion === 'v1' && r.kind === 'Pod');
}

/** `<pod>-<claim>-`, or past 57 characters both parts cut in proportion (and no trailing dash), as the controller names them. */
export function generatedClaimName(podName: string, podClaimName: string): string {
  const base = `${podName}-${podClaimName}-`;
  const max = 57;
  if (base.length <= max) return base;
  const podPart = podName.slice(0, Math.floor((podName.length * max) / base.length));
  const claimPart = podClaimName.slice(0, Math.floor((podClaimName.length * max) / base.length));
  return `${podPart}-${claimPart}`;
}

function claimsOf(ctx: SyncContext, namespace: string): KubeObj[] {
  return ctx.cache.list('resourceclaims').filter((c) => (c.metadata.namespace ?? 'default') === namespace);
}

/** The claim made for this pod claim already (owned by the pod, annotated with its name), if any. */
function madeClaim(ctx: SyncContext, pod: KubeObj, podClaim: string): KubeObj | undefined {
  return claimsOf(ctx, pod.metadata.namespace ?? 'default').find(
    (c) => owningPod(c)?.uid === pod.metadata.uid && c.metadata.annotations?.[POD_CLAIM_NAME_ANNOTATION] === podClaim,
  );
}

async function createFromTemplate(ctx: SyncContext, pod: KubeObj, ref: PodClaim): Promise<KubeObj> {
  const ns = pod.metadata.namespace ?? 'default';
  const template = ctx.cache
    .list('resourceclaimtemplates')
    .find((t) => (t.metadata.namespace ?? 'default') === ns && t.metadata.name === ref.resourceClaimTemplateName);
  if (!template) throw new Error(`resource claim template "${ref.resourceClaimTemplateName}" not found`);
  const body = (template['spec'] ?? {}) as { metadata?: { labels?: object; annotations?: object }; spec?: unknown };
  const claim = await ctx.client.create(KIND_PATHS.resourceclaims.collection(encodeURIComponent(ns)), {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: {
      generateName: generatedClaimName(pod.metadata.name, ref.name),
      namespace: ns,
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Pod',
          name: pod.metadata.name,
          uid: pod.metadata.uid,
          controller: true,
        },
      ],
      annotations: { ...(body.metadata?.annotations ?? {}), [POD_CLAIM_NAME_ANNOTATION]: ref.name },
      ...(body.metadata?.labels ? { labels: body.metadata.labels } : {}),
    },
    spec: body.spec,
  });
  ctx.cache.store('resourceclaims', claim);
  return claim;
}

/** A pod's template claims made and named in its status; nothing for a pod being deleted. */
export async function syncPodClaims(ctx: SyncContext, pod: KubeObj): Promise<void> {
  if (pod.metadata.deletionTimestamp) return;
  const statuses = claimStatusesOf(pod);
  const added: ClaimStatus[] = [];
  for (const ref of podClaimsOf(pod)) {
    if (!ref.resourceClaimTemplateName) continue;
    const named = statuses.find((s) => s.name === ref.name)?.resourceClaimName;
    const live = named
      ? claimsOf(ctx, pod.metadata.namespace ?? 'default').find((c) => c.metadata.name === named)
      : undefined;
    if (live && owningPod(live)?.uid === pod.metadata.uid) continue;
    const claim = madeClaim(ctx, pod, ref.name) ?? (await createFromTemplate(ctx, pod, ref));
    added.push({ name: ref.name, resourceClaimName: claim.metadata.name });
  }
  if (added.length === 0) return;
  const kept = statuses.filter((s) => !added.some((a) => a.name === s.name));
  const written = await ctx.client.mergePatch(`${objectPath('pods', pod)}/status`, {
    status: { resourceClaimStatuses: [...kept, ...added] },
  });
  ctx.cache.store('pods', written);
}

/** The pod a consumer reference names, as the cache or (when the cache lacks it) the API server has it now. */
async function livePod(ctx: SyncContext, namespace: string, name: string): Promise<KubeObj | undefined> {
  const cached = ctx.cache
    .list('pods')
    .find((p) => (p.metadata.namespace ?? 'default') === namespace && p.metadata.name === name);
  if (cached) return cached;
  try {
    return await ctx.client.get(objectPath('pods', { metadata: { name, namespace } }));
  } catch (e) {
    if (e instanceof KubeApiError && e.code === 404) return undefined;
    throw e;
  }
}

async function stillConsumes(ctx: SyncContext, namespace: string, r: Consumer): Promise<boolean> {
  if ((r.apiGroup ?? '') !== '' || r.resource !== 'pods')
    throw new Error(`unsupported ReservedFor entry: ${JSON.stringify(r)}`);
  const pod = await livePod(ctx, namespace, r.name);
  return !!pod && pod.metadata.uid === r.uid && !isPodDone(pod);
}

const finalizersOf = (claim: KubeObj) => (claim.metadata['finalizers'] as string[] | undefined) ?? [];

async function writeClaim(ctx: SyncContext, claim: KubeObj, sub: '' | '/status', body: KubeObj): Promise<KubeObj> {
  const written = await ctx.client.request('PUT', `${objectPath('resourceclaims', claim)}${sub}`, body);
  if (written.metadata.deletionTimestamp && finalizersOf(written).length === 0)
    ctx.cache.forget('resourceclaims', claim);
  else ctx.cache.store('resourceclaims', written);
  return written;
}

/**
 * One claim, as `syncClaim` upstream: consumers that are gone dropped (the allocation cleared with
 * the last one) and then the finalizer removed once unallocated; a deleted, unused claim released;
 * a made claim whose pod is done or gone deleted. The finalizer of a claim nobody stopped using is
 * left alone: the scheduler adds it in PreBind before it writes the allocation, and an unallocated
 * claim keeps it when that write is refused (taking it away there would race the scheduler's write).
 */
export async function syncClaim(ctx: SyncContext, claim: KubeObj): Promise<void> {
  const ns = claim.metadata.namespace ?? 'default';
  const status = (claim['status'] ?? {}) as { allocation?: unknown; reservedFor?: Consumer[] };
  const reserved = status.reservedFor ?? [];
  const valid: Consumer[] = [];
  for (const r of reserved) if (await stillConsumes(ctx, ns, r)) valid.push(r);
  const hasFinalizer = finalizersOf(claim).includes(CLAIM_FINALIZER);
  const lostConsumers = valid.length < reserved.length;
  const released = !lostConsumers && hasFinalizer && !!claim.metadata.deletionTimestamp && valid.length === 0;
  let current = claim;
  if (lostConsumers || (released && status.allocation)) {
    const next = { ...status, ...(valid.length ? { reservedFor: valid } : { reservedFor: undefined }) };
    if (valid.length === 0 && hasFinalizer) delete next.allocation;
    current = await writeClaim(ctx, claim, '/status', { ...claim, status: next });
  }
  const nowAllocated = (current['status'] as { allocation?: unknown } | undefined)?.allocation;
  if ((lostConsumers || released) && finalizersOf(current).includes(CLAIM_FINALIZER) && !nowAllocated) {
    const rest = finalizersOf(current).filter((f) => f !== CLAIM_FINALIZER);
    current = await writeClaim(ctx, current, '', { ...current, metadata: { ...current.metadata, finalizers: rest } });
  }
  if (valid.length === 0) await deleteIfPodDone(ctx, current);
}

/** A claim made for a pod goes once that pod is done, replaced or (where the garbage collector would act) gone. */
async function deleteIfPodDone(ctx: SyncContext, claim: KubeObj): Promise<void> {
  const owner = owningPod(claim);
  if (!owner || claim.metadata.deletionTimestamp) return;
  const pod = await livePod(ctx, claim.metadata.namespace ?? 'default', owner.name);
  if (pod && pod.metadata.uid === owner.uid && !isPodDone(pod)) return;
  try {
    await ctx.client.delete(objectPath('resourceclaims', claim));
  } catch (e) {
    if (!(e instanceof KubeApiError && e.code === 404)) throw e;
  }
  ctx.cache.forget('resourceclaims', claim);
}
