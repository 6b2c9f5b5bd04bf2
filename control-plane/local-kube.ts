/**
 * The Kubernetes calls answered from the ClusterState itself, for runs without a cluster
 * (`kube.mode: none`: `vcuda local`, the simulator, what-if planning). Pods and nodes are fed into
 * the state by whoever plays the cluster; patches and Bindings land back in it, so the rest of the
 * control plane works unchanged. Secrets and ConfigMaps live in memory; Events go to `onEvent`.
 */
import { type PodEvent, VcudaError } from '../contract/index.js';
import type { ClusterState } from './cluster-state.js';
import { type ConfigMapData, type ControlPlaneKube, withBinding } from './kube-client.js';
import type { PodWithStatus } from './placement/cluster-snapshot.js';

export function createLocalKube(
  state: ClusterState,
  onEvent?: (namespace: string, event: PodEvent) => void,
): ControlPlaneKube {
  const secrets = new Map<string, ConfigMapData>();
  const configMaps = new Map<string, ConfigMapData>();
  const mustPod = (namespace: string, name: string): PodWithStatus => {
    const pod = state.pod(namespace, name);
    if (!pod) throw new VcudaError('not-found', `pod ${namespace}/${name} not found`);
    return pod;
  };
  return {
    async readPod(namespace, name) {
      return state.pod(namespace, name);
    },
    async patchPodAnnotations(namespace, name, annotations) {
      const pod = mustPod(namespace, name);
      const next = { ...(pod.metadata?.annotations ?? {}) };
      for (const [k, v] of Object.entries(annotations)) {
        if (v === null) delete next[k];
        else next[k] = v;
      }
      const patched = { ...pod, metadata: { ...pod.metadata, annotations: next } } as PodWithStatus;
      state.upsertPod(patched);
      return patched;
    },
    async bindPod(namespace, name, uid, node, annotations) {
      const pod = mustPod(namespace, name);
      if (pod.metadata?.uid !== uid) throw new VcudaError('conflict', `pod ${namespace}/${name} has another uid`);
      if (pod.spec?.nodeName)
        throw new VcudaError('conflict', `pod ${namespace}/${name} is already bound to ${pod.spec.nodeName}`);
      state.upsertPod(withBinding(pod, node, annotations));
    },
    async createEvent(namespace, event) {
      onEvent?.(namespace, event);
    },
    async updateEvent(namespace, event) {
      onEvent?.(namespace, event);
    },
    async readSecret(namespace, name) {
      return secrets.get(`${namespace}/${name}`);
    },
    async createSecret(namespace, name, data) {
      const key = `${namespace}/${name}`;
      if (secrets.has(key)) throw new VcudaError('conflict', `secret ${key} already exists`);
      secrets.set(key, data);
    },
    async applyConfigMap(namespace, name, data) {
      configMaps.set(`${namespace}/${name}`, data);
    },
  };
}
