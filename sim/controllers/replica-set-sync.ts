/**
 * The ReplicaSet controller's decision (kube-controller-manager's `syncReplicaSet`), without I/O:
 * which pods are the set's (its own, and orphans its selector matches, which it adopts), how many
 * to create or which to delete so that `spec.replicas` pods are active, and the status to report.
 */

import { type LabelSelector, matchLabelSelector } from '../apiserver/selectors.js';
import type { KubeObj } from '../kube-client.js';
import { controllerOf, creationTime, isActivePod, isDeleting, isPodReady, phaseOf, uidOf } from './workload-objects.js';

/** kube-controller-manager's burstReplicas: at most this many creates or deletes per sync. */
export const BURST_REPLICAS = 500;

export type ReplicaSetStatus = {
  replicas: number;
  fullyLabeledReplicas: number;
  readyReplicas: number;
  availableReplicas: number;
  observedGeneration: number;
  [k: string]: unknown;
};

export type ReplicaSetPlan = {
  /** Pods to create from the template. */
  create: number;
  /** Active pods to delete, the cheapest to lose first. */
  remove: KubeObj[];
  /** Orphan pods the selector matches: they get the set's controller reference. */
  adopt: KubeObj[];
  status: ReplicaSetStatus;
};

type SetSpec = {
  replicas?: number;
  selector?: LabelSelector;
  template?: { metadata?: { labels?: Record<string, string> } };
};

export function selectorMatches(selector: LabelSelector | undefined, obj: KubeObj): boolean {
  // A nil or empty selector selects nothing for a controller (never every pod of the namespace).
  if (!selector || Object.keys(selector.matchLabels ?? {}).length + (selector.matchExpressions ?? []).length === 0)
    return false;
  return matchLabelSelector(selector, obj.metadata.labels ?? {});
}

/**
 * `pods`: the pods of the set's namespace. A pod another controller owns is never touched; a
 * set being deleted adopts nothing and changes nothing.
 */
export function planReplicaSet(rs: KubeObj, pods: readonly KubeObj[]): ReplicaSetPlan {
  const spec = (rs['spec'] ?? {}) as SetSpec;
  const uid = uidOf(rs);
  const owned = pods.filter((p) => controllerOf(p)?.uid === uid);
  const adopt = isDeleting(rs)
    ? []
    : pods.filter((p) => !controllerOf(p) && !isDeleting(p) && selectorMatches(spec.selector, p));
  const active = [...owned, ...adopt].filter(isActivePod);
  const status = replicaSetStatus(rs, active);
  if (isDeleting(rs)) return { create: 0, remove: [], adopt: [], status };
  const diff = active.length - (spec.replicas ?? 1);
  if (diff < 0) return { create: Math.min(-diff, BURST_REPLICAS), remove: [], adopt, status };
  const remove = [...active].sort(deletionOrder).slice(0, Math.min(diff, BURST_REPLICAS));
  return { create: 0, remove, adopt, status };
}

function replicaSetStatus(rs: KubeObj, active: readonly KubeObj[]): ReplicaSetStatus {
  const templateLabels = ((rs['spec'] as SetSpec | undefined)?.template?.metadata?.labels ?? {}) as Record<
    string,
    string
  >;
  const fullyLabeled = active.filter((p) =>
    Object.entries(templateLabels).every(([k, v]) => p.metadata.labels?.[k] === v),
  );
  const ready = active.filter(isPodReady);
  const previous = (rs['status'] ?? {}) as Record<string, unknown>;
  return {
    ...previous,
    replicas: active.length,
    fullyLabeledReplicas: fullyLabeled.length,
    readyReplicas: ready.length,
    // minReadySeconds is not simulated: a ready pod is available at once.
    availableReplicas: ready.length,
    observedGeneration: Number(rs.metadata['generation'] ?? 1),
  };
}

/**
 * controller.ActivePods' order: unscheduled before scheduled, Pending before Running, not ready
 * before ready, and the newest first.
 */
function deletionOrder(a: KubeObj, b: KubeObj): number {
  const node = (p: KubeObj) => ((p['spec'] as { nodeName?: string } | undefined)?.nodeName ? 1 : 0);
  const phase = (p: KubeObj) => ({ Pending: 0, Unknown: 1, Running: 2 })[phaseOf(p) ?? 'Pending'] ?? 0;
  const ready = (p: KubeObj) => (isPodReady(p) ? 1 : 0);
  return node(a) - node(b) || phase(a) - phase(b) || ready(a) - ready(b) || creationTime(b) - creationTime(a);
}
