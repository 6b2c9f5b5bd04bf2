/**
 * The `scale` subresource of Deployments and ReplicaSets (autoscaling/v1 Scale), which
 * `kubectl scale` reads and patches: its `spec.replicas` is the object's, its `status.selector`
 * the object's selector as a string.
 */
import { invalid } from './api-status.js';
import { applyPatch, type PatchType } from './patch.js';
import type { KubeObject, LabelSelector } from './selectors.js';

function selectorString(selector: LabelSelector | undefined): string {
  const terms = Object.entries(selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of selector?.matchExpressions ?? []) {
    const values = (e.values ?? []).join(',');
    if (e.operator === 'In') terms.push(`${e.key} in (${values})`);
    else if (e.operator === 'NotIn') terms.push(`${e.key} notin (${values})`);
    else if (e.operator === 'Exists') terms.push(e.key);
    else if (e.operator === 'DoesNotExist') terms.push(`!${e.key}`);
  }
  return terms.join(',');
}

/** The Scale view of a Deployment or ReplicaSet. */
export function toScale(obj: KubeObject): KubeObject {
  const spec = (obj['spec'] ?? {}) as { replicas?: number; selector?: LabelSelector };
  const status = (obj['status'] ?? {}) as { replicas?: number };
  const { name, namespace, uid, resourceVersion, creationTimestamp } = obj.metadata;
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: { name, namespace, uid, resourceVersion, creationTimestamp },
    spec: { replicas: spec.replicas ?? 0 },
    status: { replicas: status.replicas ?? 0, selector: selectorString(spec.selector) },
  };
}

/** What a PUT or PATCH of the Scale asks of the object: its replicas, and the version it was read at. */
export function scaleRequest(
  current: KubeObject,
  body: unknown,
  patchType: PatchType | undefined,
): { replicas: number; resourceVersion?: string } {
  const scale = (patchType ? applyPatch(patchType, toScale(current), body) : body) as {
    metadata?: { resourceVersion?: string };
    spec?: { replicas?: unknown };
  };
  const replicas = scale?.spec?.replicas;
  if (!Number.isInteger(replicas) || (replicas as number) < 0)
    throw invalid('Scale', current.metadata.name, [
      `spec.replicas: Invalid value: ${JSON.stringify(replicas ?? null)}: must be greater than or equal to 0`,
    ]);
  const rv = scale.metadata?.resourceVersion;
  return { replicas: replicas as number, ...(rv ? { resourceVersion: rv } : {}) };
}
