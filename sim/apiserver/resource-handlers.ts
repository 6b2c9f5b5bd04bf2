/**
 * The API server's semantics over the object store: create with defaults and admission,
 * optimistic concurrency (409 on a stale resourceVersion), status subresources, patches that
 * retry on a concurrent write as kube-apiserver's GuaranteedUpdate does, pod binding, and graceful
 * deletion (a bound pod stays Terminating until its kubelet confirms) with finalizers.
 */
import { randomUUID } from 'node:crypto';
import { type AdmissionOperation, type AdmissionSources, admit } from './admission.js';
import { type ApiError, alreadyExists, badRequest, conflict, invalid, notFound } from './api-status.js';
import { DRA_RESOURCES, defaultDraObject, validateDraObject } from './dra-validation.js';
import { applyCreateDefaults, applyWriteNormalization } from './object-defaults.js';
import type { ObjectStore } from './object-store.js';
import { applyPatch, type PatchType } from './patch.js';
import { resolvePodPriority } from './pod-priority.js';
import { apiVersionOf, type ResourceType, typeKey } from './resource-registry.js';
import { scaleRequest, toScale } from './scale-subresource.js';
import type { KubeObject, Matcher } from './selectors.js';
import {
  defaultWorkload,
  defaultWorkloadSpec,
  updatedWorkload,
  validateWorkload,
  WORKLOAD_RESOURCES,
  withJobSelector,
} from './workload-defaults.js';

/** `extra`: as TokenReview and AdmissionReview carry it (a node-bound token's `authentication.kubernetes.io/node-name`). */
export type UserInfo = { username: string; groups: string[]; extra?: Record<string, string[]> };
/** `warn`: where admission warnings go (the response's `Warning` headers). */
export type WriteOptions = { dryRun: boolean; user: UserInfo; warn?: (text: string) => void };
export type DeleteOptions = WriteOptions & {
  gracePeriodSeconds?: number;
  /** What becomes of the object's dependents (the garbage collector carries it out). */
  propagationPolicy?: 'Orphan' | 'Background' | 'Foreground';
  preconditions?: { uid?: string; resourceVersion?: string };
};

type Now = () => Date;

const isDra = (type: ResourceType) => type.group === 'resource.k8s.io' && DRA_RESOURCES.has(type.resource);

function nameError(type: ResourceType, name: string | undefined): ApiError | undefined {
  if (!name) return invalid(type.kind, '', ['metadata.name: Required value: name or generateName is required']);
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name) || name.length > 253) {
    return invalid(type.kind, name, [
      `metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'`,
    ]);
  }
  return undefined;
}

/** The 409 for a write based on an older resourceVersion than the stored one. */
function staleObject(type: ResourceType, name: string): ApiError {
  return conflict(
    type.resource,
    type.group,
    name,
    'the object has been modified; please apply your changes to the latest version and try again',
  );
}

function randomSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  let s = '';
  for (let i = 0; i < 5; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
  return s;
}

export class ResourceHandlers {
  constructor(
    private readonly store: ObjectStore,
    private readonly admission: AdmissionSources,
    private readonly now: Now = () => new Date(),
  ) {}

  /** `obj` with its type's apiVersion and kind; itself when it has them (stored objects do), so its JSON is shared. */
  private stamp(type: ResourceType, obj: KubeObject): KubeObject {
    const apiVersion = apiVersionOf(type);
    if (obj.apiVersion === apiVersion && obj.kind === type.kind) return obj;
    return { ...obj, apiVersion, kind: type.kind };
  }

  private async runAdmission(
    type: ResourceType,
    operation: AdmissionOperation,
    obj: KubeObject | null,
    old: KubeObject | null,
    opts: WriteOptions,
    subresource?: string,
  ): Promise<KubeObject | null> {
    // kube-apiserver never sends webhook configurations themselves through webhooks.
    if (type.group === 'admissionregistration.k8s.io') return obj;
    const meta = (obj ?? old)!.metadata;
    return admit(
      {
        operation,
        type,
        ...(subresource ? { subresource } : {}),
        ...(meta.namespace ? { namespace: meta.namespace } : {}),
        name: meta.name,
        object: obj,
        oldObject: old,
        dryRun: opts.dryRun,
        userInfo: opts.user,
        ...(opts.warn ? { warn: opts.warn } : {}),
      },
      this.admission,
    );
  }

  /** The Priority admission plugin, which runs before the webhooks. */
  private withPriority(pod: KubeObject): KubeObject {
    const key = typeKey({ group: 'scheduling.k8s.io', resource: 'priorityclasses' });
    return resolvePodPriority(
      pod,
      (name) => this.store.get(key, undefined, name),
      () => this.store.list(key, undefined),
    );
  }

  get(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const obj = this.store.get(typeKey(type), namespace, name);
    if (!obj) throw notFound(type.resource, type.group, name);
    return this.stamp(type, obj);
  }

  list(type: ResourceType, namespace: string | undefined, match: Matcher) {
    const items = this.store
      .list(typeKey(type), namespace)
      .filter(match)
      .map((o) => this.stamp(type, o));
    return {
      apiVersion: apiVersionOf(type),
      kind: `${type.kind}List`,
      metadata: { resourceVersion: String(this.store.currentRevision()) },
      items,
    };
  }

  async create(type: ResourceType, namespace: string | undefined, body: KubeObject, opts: WriteOptions) {
    if (!body || typeof body !== 'object' || !body.metadata) {
      if (!body?.metadata) throw badRequest('the object provided has no metadata');
    }
    const meta = { ...body.metadata };
    if (type.namespaced) {
      if (meta.namespace && namespace && meta.namespace !== namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      meta.namespace = namespace ?? meta.namespace ?? 'default';
      if (!this.store.get('/namespaces', undefined, meta.namespace)) throw notFound('namespaces', '', meta.namespace);
    } else delete meta.namespace;
    if (!meta.name && typeof meta['generateName'] === 'string') meta.name = `${meta['generateName']}${randomSuffix()}`;
    const bad = nameError(type, meta.name);
    if (bad) throw bad;
    for (const k of ['uid', 'resourceVersion', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'selfLink'])
      delete meta[k];
    meta['creationTimestamp'] = null;
    const stamped = this.stamp(type, { ...body, metadata: meta });
    let obj: KubeObject = WORKLOAD_RESOURCES.has(type.resource)
      ? defaultWorkload(type.resource, stamped)
      : applyCreateDefaults(type.resource, stamped);
    if (type.resource === 'pods' && !type.group) obj = this.withPriority(obj);
    if (isDra(type)) obj = this.validatedDra(type, defaultDraObject(type.resource, obj), undefined, undefined);
    if (this.store.get(typeKey(type), meta.namespace, meta.name))
      throw alreadyExists(type.resource, type.group, meta.name);
    obj = (await this.runAdmission(type, 'CREATE', obj, null, opts))!;
    obj.metadata = {
      ...obj.metadata,
      uid: randomUUID(),
      creationTimestamp: this.now()
        .toISOString()
        .replace(/\.\d+Z$/, 'Z'),
    };
    if (type.resource === 'jobs') obj = withJobSelector(obj);
    const badWorkload = WORKLOAD_RESOURCES.has(type.resource) && validateWorkload(type.resource, type.kind, obj);
    if (badWorkload) throw badWorkload;
    if (opts.dryRun) return this.stamp(type, obj);
    // Admission is asynchronous: a racing create of the same name may have landed meanwhile.
    if (this.store.get(typeKey(type), meta.namespace, meta.name))
      throw alreadyExists(type.resource, type.group, meta.name);
    return this.stamp(type, this.store.insert(typeKey(type), obj));
  }

  /** PUT of an object or of its status; `body.metadata.resourceVersion`, when set, must be current. */
  async update(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    body: KubeObject,
    sub: string | undefined,
    opts: WriteOptions,
  ) {
    if (body?.metadata?.name && body.metadata.name !== name) {
      throw badRequest(`the name of the object (${body.metadata.name}) does not match the name on the URL (${name})`);
    }
    const old = this.get(type, namespace, name);
    const expected = body.metadata?.resourceVersion;
    if (expected && expected !== old.metadata.resourceVersion) {
      throw staleObject(type, name);
    }
    return this.commit(type, old, this.merged(type, old, body, sub), sub, opts);
  }

  /** PATCH, re-applied on the newest object when another write landed while admission ran. */
  async patch(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    sub: string | undefined,
    patchType: PatchType,
    patch: unknown,
    opts: WriteOptions,
  ) {
    for (let attempt = 0; ; attempt++) {
      const old = this.get(type, namespace, name);
      const patched = applyPatch(patchType, old, patch) as KubeObject;
      if (!patched || typeof patched !== 'object' || !patched.metadata) throw badRequest('the patch removed metadata');
      const expected = patched.metadata.resourceVersion;
      if (expected && expected !== old.metadata.resourceVersion) {
        throw staleObject(type, name);
      }
      try {
        return await this.commit(type, old, this.merged(type, old, patched, sub), sub, opts);
      } catch (e) {
        if (attempt < 5 && (e as { retryPatch?: boolean }).retryPatch) continue;
        throw e;
      }
    }
  }

  /**
   * PUT or PATCH of `scale`: the object's `spec.replicas` set as the Scale asks (a Scale read at
   * an older version is refused as a stale object is); the Scale after the write.
   */
  async scale(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    body: unknown,
    patchType: PatchType | undefined,
    opts: WriteOptions,
  ): Promise<KubeObject> {
    const old = this.get(type, namespace, name);
    const { replicas, resourceVersion } = scaleRequest(old, body, patchType);
    if (resourceVersion && resourceVersion !== old.metadata.resourceVersion) throw staleObject(type, name);
    const spec = { ...(old['spec'] as object), replicas };
    return toScale(await this.commit(type, old, this.merged(type, old, { ...old, spec }, undefined), undefined, opts));
  }

  /** Applies what an update may change: status only through `/status`, never identity fields. */
  private merged(type: ResourceType, old: KubeObject, body: KubeObject, sub: string | undefined): KubeObject {
    if (sub === 'status' && isDra(type)) return this.validatedDra(type, { ...old, status: body['status'] }, old, sub);
    if (sub === 'status') return { ...old, status: body['status'] };
    const next: KubeObject = { ...body, metadata: { ...body.metadata } };
    for (const k of [
      'uid',
      'creationTimestamp',
      'name',
      'namespace',
      'deletionTimestamp',
      'deletionGracePeriodSeconds',
    ]) {
      if (old.metadata[k] === undefined) delete next.metadata[k];
      else next.metadata[k] = old.metadata[k];
    }
    if (type.subresources.includes('status')) {
      if (old['status'] === undefined) delete next['status'];
      else next['status'] = old['status'];
    }
    if (type.resource === 'pods') this.checkPodSpecUpdate(old, next);
    if (WORKLOAD_RESOURCES.has(type.resource)) return this.stamp(type, this.updatedWorkload(type, old, next));
    if (isDra(type))
      return this.stamp(type, this.validatedDra(type, defaultDraObject(type.resource, next, old), old, sub));
    return this.stamp(type, applyWriteNormalization(type.resource, next));
  }

  /** A `resource.k8s.io` object as kube-apiserver's validation lets it through; its 422 otherwise. */
  private validatedDra(type: ResourceType, obj: KubeObject, old: KubeObject | undefined, sub: string | undefined) {
    const bad = validateDraObject(type.resource, type.kind, obj, old, sub);
    if (bad) throw bad;
    return obj;
  }

  /** A Deployment, ReplicaSet or Job with its spec's defaults, its generation moved on, and valid. */
  private updatedWorkload(type: ResourceType, old: KubeObject, next: KubeObject): KubeObject {
    const updated = updatedWorkload(type.kind, old, defaultWorkloadSpec(type.resource, next));
    if (updated instanceof Error) throw updated;
    const bad = validateWorkload(type.resource, type.kind, updated);
    if (bad) throw bad;
    return updated;
  }

  private checkPodSpecUpdate(old: KubeObject, next: KubeObject): void {
    // A patch that leaves the spec alone shares the stored spec object.
    if (old['spec'] === next['spec']) return;
    const comparable = (o: KubeObject) => {
      const {
        activeDeadlineSeconds: _deadline,
        tolerations: _tolerations,
        ...spec
      } = (o['spec'] ?? {}) as Record<string, unknown>;
      const containers = spec['containers'];
      if (Array.isArray(containers)) {
        // `image: undefined` leaves the JSON as deleting it would, without copying the stored spec deeply.
        spec['containers'] = containers.map((c: unknown) =>
          c !== null && typeof c === 'object' ? { ...c, image: undefined } : c,
        );
      }
      return JSON.stringify(spec);
    };
    if (comparable(old) !== comparable(next)) {
      throw invalid('Pod', old.metadata.name, [
        'spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations)',
      ]);
    }
  }

  private async commit(
    type: ResourceType,
    old: KubeObject,
    next: KubeObject,
    sub: string | undefined,
    opts: WriteOptions,
  ) {
    const admitted = (await this.runAdmission(type, 'UPDATE', next, old, opts, sub))!;
    if (opts.dryRun) return admitted;
    const current = this.store.get(typeKey(type), old.metadata.namespace, old.metadata.name);
    if (!current) throw notFound(type.resource, type.group, old.metadata.name);
    if (current.metadata.resourceVersion !== old.metadata.resourceVersion) {
      const e = staleObject(type, old.metadata.name);
      Object.assign(e, { retryPatch: true });
      throw e;
    }
    if (this.isReadyToVanish(admitted)) {
      return this.stamp(type, this.store.remove(typeKey(type), old.metadata.namespace, old.metadata.name)!);
    }
    return this.stamp(type, this.store.update(typeKey(type), admitted));
  }

  /** A deleted object goes once its finalizers are gone and its grace period is over. */
  private isReadyToVanish(obj: KubeObject): boolean {
    if (!obj.metadata['deletionTimestamp']) return false;
    const finalizers = (obj.metadata['finalizers'] as string[] | undefined) ?? [];
    return finalizers.length === 0 && (obj.metadata['deletionGracePeriodSeconds'] ?? 0) === 0;
  }

  async delete(type: ResourceType, namespace: string | undefined, name: string, opts: DeleteOptions) {
    const old = this.get(type, namespace, name);
    const pre = opts.preconditions;
    if (pre?.uid && pre.uid !== old.metadata['uid']) {
      throw conflict(
        type.resource,
        type.group,
        name,
        `the UID in the precondition (${pre.uid}) does not match the UID in record (${String(old.metadata['uid'])}). The object might have been deleted and then recreated`,
      );
    }
    if (pre?.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion) {
      throw conflict(
        type.resource,
        type.group,
        name,
        `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${old.metadata.resourceVersion}). The object might have been modified`,
      );
    }
    await this.runAdmission(type, 'DELETE', null, old, opts);
    if (opts.dryRun) return old;
    const grace = this.graceSeconds(type, old, opts.gracePeriodSeconds);
    const finalizers = this.deletionFinalizers(type, old, opts);
    if (grace === 0 && finalizers.length === 0) {
      if (type.resource === 'namespaces') this.removeNamespaceContents(name);
      return this.stamp(type, this.store.remove(typeKey(type), namespace, name)!);
    }
    const current = old.metadata['deletionGracePeriodSeconds'] as number | undefined;
    if (old.metadata['deletionTimestamp'] && current !== undefined && current <= grace) return old;
    const marked: KubeObject = { ...old, metadata: { ...old.metadata } };
    if (finalizers.length) marked.metadata['finalizers'] = finalizers;
    marked.metadata['deletionTimestamp'] ??= new Date(this.now().getTime() + grace * 1000)
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    marked.metadata['deletionGracePeriodSeconds'] = grace;
    return this.stamp(type, this.store.update(typeKey(type), marked));
  }

  /**
   * The object's finalizers with the garbage collector's for an Orphan or Foreground deletion
   * (batch/v1 Jobs orphan their pods when no policy is given, with kube-apiserver's warning).
   */
  private deletionFinalizers(type: ResourceType, old: KubeObject, opts: DeleteOptions): string[] {
    const finalizers = (old.metadata['finalizers'] as string[] | undefined) ?? [];
    let policy = opts.propagationPolicy;
    if (!policy && type.resource === 'jobs') {
      policy = 'Orphan';
      opts.warn?.(
        'child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning',
      );
    }
    const extra = policy === 'Orphan' ? 'orphan' : policy === 'Foreground' ? 'foregroundDeletion' : undefined;
    return extra && !finalizers.includes(extra) ? [...finalizers, extra] : finalizers;
  }

  /** Pods on a node wait for their kubelet; everything else (and unbound pods) goes at once. */
  private graceSeconds(type: ResourceType, obj: KubeObject, requested: number | undefined): number {
    if (type.resource !== 'pods') return 0;
    const spec = (obj['spec'] ?? {}) as { nodeName?: string; terminationGracePeriodSeconds?: number };
    const phase = (obj['status'] as { phase?: string } | undefined)?.phase;
    if (!spec.nodeName || phase === 'Succeeded' || phase === 'Failed') return 0;
    return Math.max(0, requested ?? spec.terminationGracePeriodSeconds ?? 30);
  }

  private removeNamespaceContents(namespace: string): void {
    for (const key of [
      '/pods',
      '/events',
      '/configmaps',
      '/secrets',
      '/serviceaccounts',
      'coordination.k8s.io/leases',
      'apps/deployments',
      'apps/replicasets',
      'batch/jobs',
      'resource.k8s.io/resourceclaims',
      'resource.k8s.io/resourceclaimtemplates',
    ]) {
      for (const o of this.store.list(key, namespace)) this.store.remove(key, namespace, o.metadata.name);
    }
  }

  /**
   * `POST pods/{name}/binding`: sets spec.nodeName once, as the scheduler (or extender) decides,
   * and merges the Binding's annotations into the pod in the same write (kube-apiserver's
   * setPodHostAndAnnotations).
   */
  bind(type: ResourceType, namespace: string, name: string, body: KubeObject, opts: WriteOptions) {
    const target = (body as { target?: { kind?: string; name?: string } }).target;
    if (!target?.name) throw invalid('Binding', name, ['target.name: Required value']);
    const pod = this.get(type, namespace, name);
    const uid = body.metadata?.['uid'];
    if (uid && uid !== pod.metadata['uid']) {
      throw conflict(
        'pods/binding',
        '',
        name,
        `Precondition failed: UID in precondition: ${String(uid)}, UID in object meta: ${String(pod.metadata['uid'])}`,
      );
    }
    const spec = (pod['spec'] ?? {}) as { nodeName?: string };
    if (pod.metadata['deletionTimestamp'])
      throw conflict('pods/binding', '', name, `pod ${name} is being deleted, cannot be assigned to a host`);
    if (spec.nodeName)
      throw conflict('pods/binding', '', name, `pod ${name} is already assigned to node "${spec.nodeName}"`);
    if (opts.dryRun) return;
    const now = this.now()
      .toISOString()
      .replace(/\.\d+Z$/, 'Z');
    const status = (pod['status'] ?? {}) as { conditions?: { type: string }[] };
    const conditions = (status.conditions ?? []).filter((c) => c.type !== 'PodScheduled');
    conditions.push({ type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: now } as never);
    const annotations = (body.metadata?.['annotations'] ?? {}) as Record<string, string>;
    const metadata = Object.keys(annotations).length
      ? { ...pod.metadata, annotations: { ...((pod.metadata['annotations'] ?? {}) as object), ...annotations } }
      : pod.metadata;
    const next = { ...pod, metadata, spec: { ...spec, nodeName: target.name }, status: { ...status, conditions } };
    this.store.update(typeKey(type), next);
  }
}
