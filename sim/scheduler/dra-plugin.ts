/**
 * kube-scheduler's DynamicResources plugin, as far as the simulator needs it: the watches that
 * feed `DraCache`, PreFilter (the pod's claims exist, made for it), Filter (this node can allocate
 * every claim not allocated yet, with `dra-allocator.ts`; an allocated claim's node selector holds),
 * and PreBind (the delete-protection finalizer, then allocation and `reservedFor` in one status
 * update per claim, before the pod is bound; a conflict read again and retried, any other refusal
 * failing the binding cycle), in the order and with the words kube-scheduler 1.36 uses.
 */
import { randomUUID } from 'node:crypto';
import { KubeApiError, type KubeClient, type KubeObj } from '../kube-client.js';
import { allocateClaim } from './dra-allocator.js';
import { claimKey, type DraCache } from './dra-cache.js';
import { type AllocationResult, CLAIM_FINALIZER, type ClaimAllocation, type ResourceClaim } from './dra-objects.js';

const GV = '/apis/resource.k8s.io/v1';
/** Why a node fails the DynamicResources filter, in kube-scheduler's words. */
export const CANNOT_ALLOCATE = 'cannot allocate all claims';

const claimPath = (c: ResourceClaim) =>
  `${GV}/namespaces/${encodeURIComponent(c.metadata.namespace ?? 'default')}/resourceclaims/${encodeURIComponent(c.metadata.name)}`;

/** Starts the slice, class and claim watches; every change may let a waiting pod fit (`nudge`). */
export function watchDra(client: KubeClient, cache: DraCache, nudge: () => void, signal: AbortSignal): void {
  const kinds = [
    ['slices', `${GV}/resourceslices`],
    ['classes', `${GV}/deviceclasses`],
    ['claims', `${GV}/resourceclaims`],
  ] as const;
  for (const [kind, path] of kinds) {
    void client.listWatch(
      path,
      '',
      {
        onSync: (items) => {
          cache.sync(kind, items);
          nudge();
        },
        onEvent: (e) => {
          cache.event(kind, e.type, e.object);
          nudge();
        },
      },
      signal,
    );
  }
}

type PodClaimRef = { name: string; resourceClaimName?: string; resourceClaimTemplateName?: string };
type PodWithClaims = KubeObj & {
  spec?: { resourceClaims?: PodClaimRef[] };
  status?: { resourceClaimStatuses?: { name: string; resourceClaimName?: string | null }[] };
};

export function hasClaims(pod: KubeObj): boolean {
  return ((pod as PodWithClaims).spec?.resourceClaims ?? []).length > 0;
}

function isOwnedBy(claim: ResourceClaim, pod: KubeObj): boolean {
  const refs = (claim.metadata['ownerReferences'] ?? []) as { uid?: string; controller?: boolean }[];
  return refs.some((r) => r.controller === true && r.uid === pod.metadata.uid);
}

/** PreFilter: the pod's claims in its order; or why it cannot be scheduled yet (unschedulable, unresolvable). */
export function podClaims(cache: DraCache, pod: KubeObj): { claims: ResourceClaim[] } | { reason: string } {
  const p = pod as PodWithClaims;
  const claims: ResourceClaim[] = [];
  for (const ref of p.spec?.resourceClaims ?? []) {
    let name = ref.resourceClaimName;
    if (!name && ref.resourceClaimTemplateName) {
      const status = p.status?.resourceClaimStatuses?.find((s) => s.name === ref.name);
      if (!status)
        return { reason: `waiting for dynamic resource controller to create the resourceclaim "${ref.name}"` };
      if (!status.resourceClaimName) continue;
      name = status.resourceClaimName;
    }
    if (!name) continue;
    const claim = cache.claim(pod.metadata.namespace, name);
    if (!claim) return { reason: `resourceclaim "${name}" not found` };
    if (ref.resourceClaimTemplateName && !isOwnedBy(claim, pod))
      return {
        reason: `ResourceClaim ${claim.metadata.namespace}/${name} was not created for pod ${pod.metadata.namespace}/${pod.metadata.name} (pod is not owner)`,
      };
    if (claim.metadata.deletionTimestamp) return { reason: `resourceclaim "${name}" is being deleted` };
    claims.push(claim);
  }
  return { claims };
}

function nodeSelectorFor(node: string): ClaimAllocation['nodeSelector'] {
  return { nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [node] }] }] };
}

function selectsNode(allocation: ClaimAllocation, node: string): boolean {
  const terms = allocation.nodeSelector?.nodeSelectorTerms;
  if (!terms) return true;
  return terms.some((t) =>
    (t.matchFields ?? []).every((f) => f.key === 'metadata.name' && f.operator === 'In' && f.values.includes(node)),
  );
}

/** What Filter decided for one node: the new allocations by claim key, or why not. */
export type NodeAllocation =
  | { ok: true; allocations: Map<string, ClaimAllocation> }
  | { ok: false; reason: string; refused?: boolean };

/** Filter: allocations on `node` for every claim of the pod not allocated yet, or why it does not fit there. */
export function allocateOnNode(
  cache: DraCache,
  claims: readonly ResourceClaim[],
  node: string,
  now: Date,
): NodeAllocation {
  const mine = new Set(claims.map((c) => claimKey(c.metadata.namespace, c.metadata.name)));
  const held: AllocationResult[] = cache.allocatedResults(mine);
  const allocations = new Map<string, ClaimAllocation>();
  for (const claim of claims) {
    const existing = cache.allocationOf(claim);
    if (existing) {
      if (!selectsNode(existing, node)) return { ok: false, reason: CANNOT_ALLOCATE };
      held.push(...existing.devices.results);
      continue;
    }
    const out = allocateClaim({
      node,
      slices: [...cache.slices.values()],
      classes: cache.classes,
      allocated: held,
      claim,
      newShareId: randomUUID,
    });
    if (!out.ok)
      return out.refused ? { ok: false, reason: out.reason, refused: true } : { ok: false, reason: CANNOT_ALLOCATE };
    held.push(...out.results);
    allocations.set(claimKey(claim.metadata.namespace, claim.metadata.name), {
      devices: { results: out.results, ...(out.config.length ? { config: out.config } : {}) },
      nodeSelector: nodeSelectorFor(node),
      allocationTimestamp: now.toISOString().replace(/\.\d+Z$/, 'Z'),
    });
  }
  return { ok: true, allocations };
}

/** client-go's `retry.DefaultRetry`: what kube-scheduler's PreBind allows a claim write that conflicts. */
const CONFLICT_RETRY = { steps: 5, delayMs: 10, jitter: 0.1 };

const claimRef = (c: ResourceClaim) => `${c.metadata.namespace ?? 'default'}/${c.metadata.name}`;
const isConflict = (e: unknown) =>
  e instanceof ClaimWriteError && e.cause instanceof KubeApiError && e.cause.code === 409;

/** A PreBind step that failed, in kube-scheduler's words, keeping the API server's answer as its cause. */
class ClaimWriteError extends Error {
  constructor(what: string, cause?: unknown) {
    super(cause === undefined ? what : `${what}: ${(cause as Error).message}`, { cause });
  }
}

/** `call`, failing with kube-scheduler's words for that step. */
function worded<T>(what: string, call: Promise<T>): Promise<T> {
  return call.catch((e: unknown) => {
    throw new ClaimWriteError(what, e);
  });
}

/** `retry.RetryOnConflict`: `attempt` again (after ~10 ms) while it fails with a conflict, 5 tries in all. */
async function retryOnConflict<T>(attempt: () => Promise<T>): Promise<T> {
  for (let step = 1; ; step++) {
    try {
      return await attempt();
    } catch (e) {
      if (step >= CONFLICT_RETRY.steps || !isConflict(e)) throw e;
      const jitter = 1 + Math.random() * CONFLICT_RETRY.jitter;
      await new Promise((r) => setTimeout(r, CONFLICT_RETRY.delayMs * jitter));
    }
  }
}

/**
 * `bindClaim`: the finalizer first (an update of the claim), then allocation and `reservedFor` in
 * one status update; a claim allocated before only gains the pod in `reservedFor`. The first try
 * writes over the claim as the scheduling cycle saw it; a conflict (someone wrote the claim since)
 * reads it again and tries again, as kube-scheduler does. Any other refusal fails the PreBind.
 */
async function bindClaim(
  client: KubeClient,
  claim: ResourceClaim,
  planned: ClaimAllocation | undefined,
  pod: KubeObj,
): Promise<void> {
  let current = claim;
  let refresh = false;
  await retryOnConflict(async () => {
    if (refresh) {
      const read = client.request<ResourceClaim>('GET', claimPath(claim));
      current = await worded(`get updated claim ${claimRef(claim)} after conflict`, read);
    }
    refresh = true;
    if (current.metadata.deletionTimestamp)
      throw new ClaimWriteError(`claim ${claimRef(current)} got deleted in the meantime`);
    let status = current.status ?? {};
    if (planned) {
      if (status.allocation)
        throw new ClaimWriteError(`claim ${claimRef(current)} got allocated elsewhere in the meantime`);
      const finalizers = current.metadata.finalizers ?? [];
      if (!finalizers.includes(CLAIM_FINALIZER)) {
        const withFinalizer = {
          ...current,
          metadata: { ...current.metadata, finalizers: [...finalizers, CLAIM_FINALIZER] },
        };
        const write = client.request<ResourceClaim>('PUT', claimPath(claim), withFinalizer);
        current = await worded(`add finalizer to claim ${claimRef(claim)}`, write);
        status = current.status ?? {};
      }
      status = { ...status, allocation: planned };
    }
    const consumer = { resource: 'pods', name: pod.metadata.name, uid: String(pod.metadata.uid) };
    status = { ...status, reservedFor: [...(status.reservedFor ?? []), consumer] };
    const what = planned ? 'add allocation and reservation to claim' : 'add reservation to claim';
    await worded(
      `${what} ${claimRef(claim)}`,
      client.request('PUT', `${claimPath(claim)}/status`, { ...current, status }),
    );
  });
}

/** A failed PreBind, worded as kube-scheduler's framework reports it (the pod's condition and its Event). */
export class PreBindFailure extends Error {
  constructor(cause: Error) {
    super(`running PreBind plugin "DynamicResources": ${cause.message}`, { cause });
  }
}

/**
 * PreBind: each claim not yet reserved for the pod bound to it (`bindClaim`), in the pod's order.
 * A failure fails the pod's binding cycle with kube-scheduler's words
 * (`running PreBind plugin "DynamicResources": …`); the scheduler tries the pod again after its backoff.
 */
export async function writeClaims(
  client: KubeClient,
  claims: readonly ResourceClaim[],
  allocations: ReadonlyMap<string, ClaimAllocation>,
  pod: KubeObj,
): Promise<void> {
  for (const claim of claims) {
    if ((claim.status?.reservedFor ?? []).some((r) => r.uid === pod.metadata.uid)) continue;
    const planned = allocations.get(claimKey(claim.metadata.namespace, claim.metadata.name));
    try {
      await bindClaim(client, claim, planned, pod);
    } catch (e) {
      throw new PreBindFailure(e as Error);
    }
  }
}
