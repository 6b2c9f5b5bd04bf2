/**
 * What kube-apiserver fills in on create before admission sees the object: the defaults of
 * the pod fields webhooks and schedulers read, and the namespace's name label.
 */

import { defaultPriorityClass } from './pod-priority.js';
import type { KubeObject } from './selectors.js';

type Container = { name: string; image?: string; imagePullPolicy?: string; [k: string]: unknown };

export function defaultContainer(c: Container): Container {
  const tagless = c.image && !/[:@]/.test(c.image.split('/').pop() ?? '');
  return {
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    imagePullPolicy: c.image?.endsWith(':latest') || tagless ? 'Always' : 'IfNotPresent',
    resources: {},
    ...c,
  };
}

function resourceQos(containers: Container[]): string {
  const res = containers.map(
    (c) => (c.resources ?? {}) as { limits?: Record<string, unknown>; requests?: Record<string, unknown> },
  );
  const any = res.some((r) => Object.keys(r.requests ?? {}).length + Object.keys(r.limits ?? {}).length > 0);
  if (!any) return 'BestEffort';
  const guaranteed = res.every(
    (r) =>
      r.limits?.['cpu'] !== undefined &&
      r.limits?.['memory'] !== undefined &&
      (r.requests?.['cpu'] === undefined || String(r.requests['cpu']) === String(r.limits['cpu'])) &&
      (r.requests?.['memory'] === undefined || String(r.requests['memory']) === String(r.limits['memory'])),
  );
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

/** Kubernetes copies limits into absent requests; schedulers read requests. */
function withRequests(c: Container): Container {
  const r = (c.resources ?? {}) as { limits?: Record<string, unknown>; requests?: Record<string, unknown> };
  if (!r.limits) return c;
  return { ...c, resources: { ...r, requests: { ...r.limits, ...(r.requests ?? {}) } } };
}

export function defaultPod(pod: KubeObject): KubeObject {
  const spec = (pod['spec'] ?? {}) as Record<string, unknown>;
  const containers = ((spec['containers'] ?? []) as Container[]).map(withRequests).map(defaultContainer);
  const initContainers = spec['initContainers']
    ? (spec['initContainers'] as Container[]).map(withRequests).map(defaultContainer)
    : undefined;
  return {
    ...pod,
    spec: {
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      securityContext: {},
      schedulerName: 'default-scheduler',
      enableServiceLinks: true,
      priority: 0,
      preemptionPolicy: 'PreemptLowerPriority',
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
      ...spec,
      containers,
      ...(initContainers ? { initContainers } : {}),
    },
    status: { phase: 'Pending', qosClass: resourceQos(containers), ...((pod['status'] as object) ?? {}) },
  };
}

export function defaultNamespace(ns: KubeObject): KubeObject {
  return {
    ...ns,
    metadata: {
      ...ns.metadata,
      labels: { ...(ns.metadata.labels ?? {}), 'kubernetes.io/metadata.name': ns.metadata.name },
    },
    spec: { finalizers: ['kubernetes'] },
    status: { phase: 'Active' },
  };
}

/** `stringData` is write-only: kube-apiserver folds it into `data` (base64) and never stores it. */
export function foldSecretStringData(secret: KubeObject): KubeObject {
  const stringData = secret['stringData'] as Record<string, string> | undefined;
  if (!stringData) return secret;
  const data = { ...((secret['data'] as Record<string, string> | undefined) ?? {}) };
  for (const [k, v] of Object.entries(stringData)) data[k] = Buffer.from(v, 'utf8').toString('base64');
  const { stringData: _dropped, ...rest } = secret;
  return { ...rest, data };
}

/** Normalizations kube-apiserver applies on every write (create and update). */
export function applyWriteNormalization(resource: string, obj: KubeObject): KubeObject {
  return resource === 'secrets' ? foldSecretStringData(obj) : obj;
}

export function applyCreateDefaults(resource: string, obj: KubeObject): KubeObject {
  // An empty type defaults to Opaque (kubectl create secret generic sends none).
  if (resource === 'secrets') return { ...foldSecretStringData(obj), type: (obj['type'] as string) || 'Opaque' };
  if (resource === 'pods') return defaultPod(obj);
  if (resource === 'namespaces') return defaultNamespace(obj);
  if (resource === 'priorityclasses') return defaultPriorityClass(obj);
  return obj;
}
