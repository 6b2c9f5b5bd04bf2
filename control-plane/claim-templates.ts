/**
 * The ResourceClaimTemplates a DRA pod's claims are made from (webhooks/pod-claims.ts), kept with
 * @kubernetes/client-node (resource.k8s.io/v1): created when absent; on AlreadyExists (another
 * replica, or an earlier pod of the same shape, created it) the stored one is read and must ask
 * the same, since the name stands for the shape. A template known to exist is not asked for again
 * for `reuseMs`, so a burst of pods of one shape costs one request.
 */
import { ApiException, type KubeConfig, ResourceV1Api, type V1ResourceClaimTemplate } from '@kubernetes/client-node';
import { VcudaError } from '../contract/index.js';
import { type ClaimTemplate, type EnsureClaimTemplates, sameClaimTemplate } from '../webhooks/pod-claims.js';

export type ClaimTemplateStore = {
  /** Creates it; resolves `exists` when it is there already (HTTP 409). */
  create(template: ClaimTemplate): Promise<'created' | 'exists'>;
  /** The stored template of that namespace and name, as the API server returns it. */
  read(template: ClaimTemplate): Promise<unknown>;
};

function failure(what: string, err: unknown): VcudaError {
  const detail = err instanceof ApiException ? `HTTP ${err.code}: ${String(err.body).slice(0, 300)}` : String(err);
  const code = err instanceof ApiException && err.code === 403 ? 'forbidden' : 'unavailable';
  return new VcudaError(code, `${what}: ${detail}`, { cause: err });
}

const describeTemplate = (t: ClaimTemplate) => `ResourceClaimTemplate ${t.metadata.namespace}/${t.metadata.name}`;

export function kubeClaimTemplateStore(kc: KubeConfig): ClaimTemplateStore {
  const api = kc.makeApiClient(ResourceV1Api);
  return {
    async create(template) {
      try {
        const body = template as unknown as V1ResourceClaimTemplate;
        await api.createNamespacedResourceClaimTemplate({ namespace: template.metadata.namespace, body });
        return 'created';
      } catch (err) {
        if (err instanceof ApiException && err.code === 409) return 'exists';
        throw failure(`creating ${describeTemplate(template)}`, err);
      }
    },
    async read(template) {
      try {
        return await api.readNamespacedResourceClaimTemplate(template.metadata);
      } catch (err) {
        throw failure(`reading ${describeTemplate(template)}`, err);
      }
    },
  };
}

/** Templates remembered as existing; past it the table starts over (a request more, never a leak). */
const MAX_REMEMBERED = 4096;

export function ensureClaimTemplatesWith(
  store: ClaimTemplateStore,
  opts: { reuseMs: number; nowMs?: () => number },
): EnsureClaimTemplates {
  const nowMs = opts.nowMs ?? (() => performance.now());
  const seenAt = new Map<string, number>();
  return async (templates) => {
    await Promise.all(
      templates.map(async (t) => {
        const key = `${t.metadata.namespace}/${t.metadata.name}`;
        const seen = seenAt.get(key);
        if (seen !== undefined && nowMs() - seen < opts.reuseMs) return;
        if ((await store.create(t)) === 'exists' && !sameClaimTemplate(t, await store.read(t))) {
          throw new VcudaError(
            'conflict',
            `${describeTemplate(t)} exists and asks another shape; vcuda names its templates from their shape: delete or rename that one`,
          );
        }
        if (seenAt.size >= MAX_REMEMBERED) seenAt.clear();
        seenAt.set(key, nowMs());
      }),
    );
  };
}
