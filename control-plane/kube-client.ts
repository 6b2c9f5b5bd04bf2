/**
 * The few Kubernetes calls the control plane makes, behind an interface it owns. The real one wraps
 * @kubernetes/client-node; tests point it at a small in-process API server, the simulator may pass
 * its own. Errors come back as VcudaError with a stable code so callers never parse HTTP.
 */
import {
  ApiException,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  PolicyV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { messageOf, type PodEvent, VcudaError } from '../contract/index.js';
import type { PdbLike } from './extender/preempt-decision.js';
import type { PodWithStatus } from './placement/cluster-snapshot.js';

export type ConfigMapData = Record<string, string>;

export type ControlPlaneKube = {
  readPod(namespace: string, name: string): Promise<PodWithStatus | undefined>;
  /** Merge-patches annotations; a null value removes the key. */
  patchPodAnnotations(
    namespace: string,
    name: string,
    annotations: Record<string, string | null>,
  ): Promise<PodWithStatus>;
  /**
   * Creates the pod's Binding (pods/binding). The API server merges the Binding's annotations
   * into the pod in the same write that sets its node, so a pod never carries one without the other.
   */
  bindPod(
    namespace: string,
    name: string,
    uid: string,
    node: string,
    annotations: Record<string, string>,
  ): Promise<void>;
  createEvent(namespace: string, event: PodEvent): Promise<void>;
  /** Writes a repeated Event's count, lastTimestamp, message and series; VcudaError 'not-found' when it is gone. */
  updateEvent(namespace: string, event: PodEvent): Promise<void>;
  readSecret(namespace: string, name: string): Promise<ConfigMapData | undefined>;
  /** Creates a Secret; throws VcudaError 'conflict' when it already exists. */
  createSecret(namespace: string, name: string, data: ConfigMapData): Promise<void>;
  /** Creates or replaces a ConfigMap. */
  applyConfigMap(namespace: string, name: string, data: ConfigMapData): Promise<void>;
  /** Every policy/v1 PodDisruptionBudget (preemption prefers victims no budget protects). */
  listPodDisruptionBudgets?(): Promise<PdbLike[]>;
};

/** The pod as a Binding leaves it: on `node`, with the Binding's annotations merged into its own. */
export function withBinding(pod: PodWithStatus, node: string, annotations: Record<string, string>): PodWithStatus {
  return {
    ...pod,
    metadata: { ...pod.metadata, annotations: { ...(pod.metadata?.annotations ?? {}), ...annotations } },
    spec: { ...(pod.spec ?? {}), nodeName: node },
  } as PodWithStatus;
}

/** Maps client errors to vcuda codes: 404 not-found, 409 conflict, anything else unavailable. */
export function toVcudaError(err: unknown, what: string): VcudaError {
  if (err instanceof VcudaError) return err;
  if (err instanceof ApiException) {
    const body = typeof err.body === 'string' ? err.body : JSON.stringify(err.body);
    let message = body;
    try {
      message = (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      // keep the raw body
    }
    const code = err.code === 404 ? 'not-found' : err.code === 409 ? 'conflict' : 'unavailable';
    // A fresh cluster without vcuda's namespace: say how to make it, not only that it is missing.
    const namespace = /^namespaces "([^"]+)" not found$/.exec(message)?.[1];
    const hint = namespace
      ? `; create it first (kubectl apply -k deploy/base creates it, or kubectl create namespace ${namespace})`
      : '';
    return new VcudaError(code, `${what}: HTTP ${err.code} ${message}${hint}`, { cause: err });
  }
  return new VcudaError('unavailable', `${what}: ${messageOf(err)}`, { cause: err });
}

async function orUndefinedOn404<T>(p: Promise<T>, what: string): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    const e = toVcudaError(err, what);
    if (e.code === 'not-found') return undefined;
    throw e;
  }
}

async function listPdbs(policy: PolicyV1Api): Promise<PdbLike[]> {
  try {
    return (await policy.listPodDisruptionBudgetForAllNamespaces({ limit: 5000 })).items as PdbLike[];
  } catch (err) {
    throw toVcudaError(err, 'list poddisruptionbudgets');
  }
}

export function createKubeClient(kc: KubeConfig): ControlPlaneKube {
  const core = kc.makeApiClient(CoreV1Api);
  const policy = kc.makeApiClient(PolicyV1Api);
  const decode = (data: Record<string, string> | undefined): ConfigMapData =>
    Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  return {
    async readPod(namespace, name) {
      return (await orUndefinedOn404(core.readNamespacedPod({ namespace, name }), `read pod ${namespace}/${name}`)) as
        | PodWithStatus
        | undefined;
    },
    async patchPodAnnotations(namespace, name, annotations) {
      try {
        return (await core.patchNamespacedPod(
          { namespace, name, body: { metadata: { annotations } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        )) as PodWithStatus;
      } catch (err) {
        throw toVcudaError(err, `patch pod ${namespace}/${name}`);
      }
    },
    async bindPod(namespace, name, uid, node, annotations) {
      try {
        await core.createNamespacedPodBinding({
          namespace,
          name,
          body: {
            apiVersion: 'v1',
            kind: 'Binding',
            metadata: { name, namespace, uid, annotations },
            target: { apiVersion: 'v1', kind: 'Node', name: node },
          },
        });
      } catch (err) {
        throw toVcudaError(err, `bind pod ${namespace}/${name} to ${node}`);
      }
    },
    ...eventCalls(core),
    async readSecret(namespace, name) {
      const s = await orUndefinedOn404(
        core.readNamespacedSecret({ namespace, name }),
        `read secret ${namespace}/${name}`,
      );
      return s ? decode(s.data) : undefined;
    },
    async createSecret(namespace, name, data) {
      try {
        await core.createNamespacedSecret({
          namespace,
          body: { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, type: 'Opaque', stringData: data },
        });
      } catch (err) {
        throw toVcudaError(err, `create secret ${namespace}/${name}`);
      }
    },
    async applyConfigMap(namespace, name, data) {
      const body = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data };
      try {
        await core.replaceNamespacedConfigMap({ namespace, name, body });
      } catch (err) {
        const e = toVcudaError(err, `replace configmap ${namespace}/${name}`);
        if (e.code !== 'not-found') throw e;
        try {
          await core.createNamespacedConfigMap({ namespace, body });
        } catch (err2) {
          throw toVcudaError(err2, `create configmap ${namespace}/${name}`);
        }
      }
    },
    listPodDisruptionBudgets: () => listPdbs(policy),
  };
}

/** Events: created once, then their repeats' count and times written (kube/event-recorder.ts). */
function eventCalls(core: CoreV1Api): Pick<ControlPlaneKube, 'createEvent' | 'updateEvent'> {
  return {
    async createEvent(namespace, event) {
      try {
        await core.createNamespacedEvent({ namespace, body: event as never });
      } catch (err) {
        throw toVcudaError(err, `create event in ${namespace}`);
      }
    },
    async updateEvent(namespace, event) {
      const { count, lastTimestamp, message, series } = event;
      try {
        await core.patchNamespacedEvent(
          { namespace, name: event.metadata.name, body: { count, lastTimestamp, message, series } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
      } catch (err) {
        throw toVcudaError(err, `update event ${namespace}/${event.metadata.name}`);
      }
    },
  };
}
