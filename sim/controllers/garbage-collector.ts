/**
 * kube-controller-manager's garbage collector for the kinds the simulator runs: a dependent
 * (ReplicaSet or pod) whose every owner is gone is deleted, the owner's absence confirmed by a live
 * GET first (an owner the cache has not seen yet is not a missing one); an owner deleted with
 * `propagationPolicy: Orphan` has its dependents' references removed before it goes, one deleted
 * with `Foreground` goes once its dependents are gone; a Job's tracking finalizer is removed from
 * the pods of a Job that is gone.
 */
import { KubeApiError, type KubeObj } from '../kube-client.js';
import { objectPath, type WatchedKind } from './informer-cache.js';
import { JOB_TRACKING_FINALIZER } from './job-sync.js';
import { isDeleting, type OwnerReference, ownerReferencesOf, uidOf } from './workload-objects.js';
import type { SyncContext } from './workload-syncs.js';

export const ORPHAN_FINALIZER = 'orphan';
export const FOREGROUND_FINALIZER = 'foregroundDeletion';

const OWNER_KINDS: Record<string, WatchedKind> = { Deployment: 'deployments', ReplicaSet: 'replicasets', Job: 'jobs' };
const DEPENDENT_KINDS: WatchedKind[] = ['replicasets', 'pods'];

function finalizersOf(obj: KubeObj): string[] {
  return (obj.metadata['finalizers'] as string[] | undefined) ?? [];
}

/** Whether the owner a reference names is gone: not cached, and a GET finds nothing or another uid. */
async function ownerGone(ctx: SyncContext, namespace: string, ref: OwnerReference): Promise<boolean> {
  const kind = OWNER_KINDS[ref.kind];
  if (!kind) return false;
  if (ctx.cache.has(kind, ref.uid)) return false;
  try {
    const live = await ctx.client.get(objectPath(kind, { metadata: { name: ref.name, namespace } }));
    return uidOf(live) !== ref.uid;
  } catch (e) {
    if (e instanceof KubeApiError && e.code === 404) return true;
    throw e;
  }
}

async function patchFinalizers(ctx: SyncContext, kind: WatchedKind, obj: KubeObj, finalizers: string[]) {
  const written = await ctx.client.mergePatch(objectPath(kind, obj), { metadata: { finalizers } });
  if (written.metadata.deletionTimestamp && finalizers.length === 0) ctx.cache.forget(kind, obj);
  else ctx.cache.store(kind, written);
}

/** Deletes what nothing owns any more; releases a Job's pods that outlived it. */
async function collectOrphans(ctx: SyncContext, kind: WatchedKind): Promise<void> {
  for (const obj of ctx.cache.list(kind)) {
    const refs = ownerReferencesOf(obj);
    if (refs.length === 0 || refs.some((r) => ctx.cache.has(OWNER_KINDS[r.kind] ?? 'pods', r.uid))) continue;
    if (!refs.every((r) => OWNER_KINDS[r.kind])) continue;
    const ns = obj.metadata.namespace ?? 'default';
    const gone = await Promise.all(refs.map((r) => ownerGone(ctx, ns, r)));
    if (!gone.every(Boolean)) continue;
    if (kind === 'pods' && finalizersOf(obj).includes(JOB_TRACKING_FINALIZER)) {
      await patchFinalizers(
        ctx,
        kind,
        obj,
        finalizersOf(obj).filter((f) => f !== JOB_TRACKING_FINALIZER),
      );
    }
    if (isDeleting(obj)) continue;
    await ctx.client.delete(objectPath(kind, obj)).catch(() => undefined);
  }
}

/** An owner being deleted with the orphan or foreground finalizer: its dependents first. */
async function finishOwnerDeletion(ctx: SyncContext, kind: WatchedKind, owner: KubeObj): Promise<void> {
  const finalizers = finalizersOf(owner);
  const uid = uidOf(owner);
  const dependents = DEPENDENT_KINDS.flatMap((k) =>
    ctx.cache
      .list(k)
      .filter((o) => ownerReferencesOf(o).some((r) => r.uid === uid))
      .map((o) => ({ kind: k, obj: o })),
  );
  if (finalizers.includes(ORPHAN_FINALIZER)) {
    for (const { kind: k, obj } of dependents) {
      const ownerReferences = ownerReferencesOf(obj).filter((r) => r.uid !== uid);
      ctx.cache.store(k, await ctx.client.mergePatch(objectPath(k, obj), { metadata: { ownerReferences } }));
    }
    await patchFinalizers(
      ctx,
      kind,
      owner,
      finalizers.filter((f) => f !== ORPHAN_FINALIZER),
    );
    return;
  }
  if (!finalizers.includes(FOREGROUND_FINALIZER)) return;
  for (const { kind: k, obj } of dependents) {
    if (isDeleting(obj)) continue;
    // Foreground all the way down: a ReplicaSet waits for its own pods.
    const body = k === 'pods' ? undefined : { propagationPolicy: 'Foreground' };
    await ctx.client.request('DELETE', objectPath(k, obj), body).catch(() => undefined);
  }
  if (dependents.length === 0)
    await patchFinalizers(
      ctx,
      kind,
      owner,
      finalizers.filter((f) => f !== FOREGROUND_FINALIZER),
    );
}

export async function collectGarbage(ctx: SyncContext): Promise<void> {
  for (const kind of Object.values(OWNER_KINDS)) {
    for (const owner of ctx.cache.list(kind)) if (isDeleting(owner)) await finishOwnerDeletion(ctx, kind, owner);
  }
  for (const kind of DEPENDENT_KINDS) await collectOrphans(ctx, kind);
}
