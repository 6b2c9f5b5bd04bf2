/**
 * The Deployment controller's decision (kube-controller-manager's `syncDeployment`), without I/O:
 * the ReplicaSet whose template is the Deployment's (created when none is, named after the
 * template's hash), how far each ReplicaSet scales this round (RollingUpdate: within maxSurge and
 * maxUnavailable; Recreate: the old ones to zero first), the old ones beyond
 * `revisionHistoryLimit`, and the status and revision to report.
 */

import type { LabelSelector } from '../apiserver/selectors.js';
import type { KubeObj } from '../kube-client.js';
import {
  canonicalJson,
  controllerOf,
  controllerReference,
  isDeleting,
  numberAt,
  type PodTemplate,
  uidOf,
} from './workload-objects.js';

export const POD_TEMPLATE_HASH = 'pod-template-hash';
export const REVISION = 'deployment.kubernetes.io/revision';
const DESIRED_REPLICAS = 'deployment.kubernetes.io/desired-replicas';
const MAX_REPLICAS = 'deployment.kubernetes.io/max-replicas';

type DeploymentSpec = {
  replicas?: number;
  selector?: LabelSelector;
  template?: PodTemplate;
  paused?: boolean;
  minReadySeconds?: number;
  revisionHistoryLimit?: number;
  strategy?: { type?: string; rollingUpdate?: { maxSurge?: number | string; maxUnavailable?: number | string } };
};

export type DeploymentPlan = {
  /** A new ReplicaSet to create (its template is the Deployment's). */
  create?: KubeObj;
  /** ReplicaSets whose `spec.replicas` (and revision annotations) change. */
  scale: { rs: KubeObj; replicas: number; annotations: Record<string, string> }[];
  /** Old, empty ReplicaSets beyond the revision history limit. */
  remove: KubeObj[];
  status: Record<string, unknown>;
  /** The Deployment's revision annotation. */
  revision: string;
};

/** FNV-1a (32 bit), as the pod-template-hash is computed from the template. */
function fnv32a(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** rand.SafeEncodeString: the hash's decimal digits mapped to letters and digits no word is made of. */
export function podTemplateHash(template: PodTemplate | undefined): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return [...String(fnv32a(canonicalJson(template ?? {})))].map((d) => alphabet[Number(d)]).join('');
}

function withoutHashLabel(template: PodTemplate | undefined): PodTemplate {
  const { [POD_TEMPLATE_HASH]: _hash, ...labels } = template?.metadata?.labels ?? {};
  return { ...template, metadata: { ...(template?.metadata ?? {}), labels } };
}

/** A percentage of `total` (rounded up for surge, down for unavailability) or a plain number. */
function resolve(value: number | string | undefined, total: number, roundUp: boolean): number {
  if (typeof value === 'number') return value;
  const m = /^(\d+)%$/.exec(value ?? '25%');
  const percent = m ? Number(m[1]) : 25;
  return roundUp ? Math.ceil((percent * total) / 100) : Math.floor((percent * total) / 100);
}

function revisionOf(rs: KubeObj): number {
  return Number(rs.metadata.annotations?.[REVISION] ?? 0) || 0;
}

const specReplicas = (rs: KubeObj) => numberAt(rs, 'spec', 'replicas');
const sum = (list: readonly KubeObj[], f: (rs: KubeObj) => number) => list.reduce((n, rs) => n + f(rs), 0);

type Rollout = { desired: number; maxSurge: number; maxUnavailable: number };

function rolloutLimits(spec: DeploymentSpec): Rollout {
  const desired = spec.replicas ?? 1;
  if (spec.strategy?.type === 'Recreate') return { desired, maxSurge: 0, maxUnavailable: desired };
  const maxSurge = resolve(spec.strategy?.rollingUpdate?.maxSurge, desired, true);
  let maxUnavailable = resolve(spec.strategy?.rollingUpdate?.maxUnavailable, desired, false);
  if (maxSurge === 0 && maxUnavailable === 0) maxUnavailable = 1;
  return { desired, maxSurge, maxUnavailable };
}

/** `replicaSets`: those of the Deployment's namespace. */
export function planDeployment(d: KubeObj, replicaSets: readonly KubeObj[], now: number): DeploymentPlan {
  const spec = (d['spec'] ?? {}) as DeploymentSpec;
  const limits = rolloutLimits(spec);
  const owned = replicaSets.filter((rs) => controllerOf(rs)?.uid === uidOf(d) && !isDeleting(rs));
  const template = canonicalJson(withoutHashLabel(spec.template));
  const current = owned.find((rs) => canonicalJson(withoutHashLabel(templateOf(rs))) === template);
  const old = owned.filter((rs) => rs !== current).sort((a, b) => revisionOf(a) - revisionOf(b));
  const maxOld = Math.max(0, ...old.map(revisionOf));
  const revision = String(current && revisionOf(current) > maxOld ? revisionOf(current) : maxOld + 1);
  const annotations = {
    [REVISION]: revision,
    [DESIRED_REPLICAS]: String(limits.desired),
    [MAX_REPLICAS]: String(limits.desired + limits.maxSurge),
  };
  const plan: DeploymentPlan = { scale: [], remove: [], status: {}, revision };
  if (isDeleting(d)) return { ...plan, status: deploymentStatus(d, current, owned, limits, now) };
  if (spec.paused) {
    if (current) scaleTo(plan, current, limits.desired, annotations);
  } else if (spec.strategy?.type === 'Recreate') planRecreate(plan, { d, current, old, limits, annotations });
  else planRollingUpdate(plan, { d, current, old, limits, annotations });
  if (old.every((rs) => specReplicas(rs) === 0 && numberAt(rs, 'status', 'replicas') === 0)) {
    const keep = spec.revisionHistoryLimit ?? 10;
    plan.remove = old.slice(0, Math.max(0, old.length - keep));
  }
  const after = owned.map((rs) => {
    const s = plan.scale.find((x) => x.rs === rs);
    return s ? { ...rs, spec: { ...(rs['spec'] as object), replicas: s.replicas } } : rs;
  });
  const currentAfter = current ? after[owned.indexOf(current)] : undefined;
  return { ...plan, status: deploymentStatus(d, currentAfter, after, limits, now) };
}

function templateOf(rs: KubeObj): PodTemplate | undefined {
  return (rs['spec'] as { template?: PodTemplate } | undefined)?.template;
}

function scaleTo(plan: DeploymentPlan, rs: KubeObj, replicas: number, annotations: Record<string, string>): void {
  const stale = Object.entries(annotations).some(([k, v]) => rs.metadata.annotations?.[k] !== v);
  if (specReplicas(rs) !== replicas || stale) plan.scale.push({ rs, replicas, annotations });
}

/** The ReplicaSet a Deployment's template gets: named `<deployment>-<hash>`, selecting that hash. */
export function newReplicaSet(d: KubeObj, replicas: number, annotations: Record<string, string>): KubeObj {
  const spec = (d['spec'] ?? {}) as DeploymentSpec;
  const hash = podTemplateHash(withoutHashLabel(spec.template));
  const labels = { ...(spec.template?.metadata?.labels ?? {}), [POD_TEMPLATE_HASH]: hash };
  const selector = {
    ...spec.selector,
    matchLabels: { ...(spec.selector?.matchLabels ?? {}), [POD_TEMPLATE_HASH]: hash },
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    metadata: {
      name: `${d.metadata.name}-${hash}`,
      namespace: d.metadata.namespace,
      labels,
      annotations,
      ownerReferences: [controllerReference(d, 'apps/v1', 'Deployment')],
    },
    spec: {
      replicas,
      minReadySeconds: spec.minReadySeconds ?? 0,
      selector,
      template: { ...spec.template, metadata: { ...(spec.template?.metadata ?? {}), labels } },
    },
  };
}

/** What one round of a rollout decides from. */
type RolloutState = {
  d: KubeObj;
  /** The ReplicaSet of the Deployment's template, when there is one. */
  current: KubeObj | undefined;
  /** The others, oldest revision first. */
  old: readonly KubeObj[];
  limits: Rollout;
  annotations: Record<string, string>;
};

function planRecreate(plan: DeploymentPlan, { d, current, old, limits, annotations }: RolloutState): void {
  const activeOld = old.filter((rs) => specReplicas(rs) > 0);
  for (const rs of activeOld) plan.scale.push({ rs, replicas: 0, annotations: {} });
  // New pods only once every old one is gone.
  if (activeOld.length > 0 || old.some((rs) => numberAt(rs, 'status', 'replicas') > 0)) return;
  if (!current) plan.create = newReplicaSet(d, limits.desired, annotations);
  else scaleTo(plan, current, limits.desired, annotations);
}

/** rolloutRolling: scale the new ReplicaSet up within maxSurge, else the old ones down within maxUnavailable. */
function planRollingUpdate(plan: DeploymentPlan, { d, current, old, limits, annotations }: RolloutState): void {
  const total = sum(old, specReplicas) + (current ? specReplicas(current) : 0);
  const newReplicas = (from: number) =>
    from >= limits.desired
      ? limits.desired
      : Math.min(limits.desired, from + Math.max(0, limits.desired + limits.maxSurge - total));
  if (!current) {
    plan.create = newReplicaSet(d, newReplicas(0), annotations);
    return;
  }
  const target = newReplicas(specReplicas(current));
  scaleTo(plan, current, target, annotations);
  if (target > specReplicas(current)) return;
  const minAvailable = limits.desired - limits.maxUnavailable;
  const newUnavailable = Math.max(0, specReplicas(current) - numberAt(current, 'status', 'availableReplicas'));
  let budget = total - minAvailable - newUnavailable;
  if (budget <= 0) return;
  // cleanupUnhealthyReplicas: first the old pods that are not available anyway...
  const scaled = new Map<KubeObj, number>(old.map((rs) => [rs, specReplicas(rs)]));
  for (const rs of old) {
    const cut = Math.min(Math.max(0, scaled.get(rs)! - numberAt(rs, 'status', 'availableReplicas')), budget);
    scaled.set(rs, scaled.get(rs)! - cut);
    budget -= cut;
  }
  // ...then available ones, as long as minAvailable pods stay available.
  let downBy = sum([...old, current], (rs) => numberAt(rs, 'status', 'availableReplicas')) - minAvailable;
  for (const rs of old) {
    const cut = Math.min(scaled.get(rs)!, Math.max(0, downBy));
    scaled.set(rs, scaled.get(rs)! - cut);
    downBy -= cut;
  }
  for (const rs of old) {
    if (scaled.get(rs)! !== specReplicas(rs)) plan.scale.push({ rs, replicas: scaled.get(rs)!, annotations: {} });
  }
}

type Condition = {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastUpdateTime: string;
  lastTransitionTime: string;
};

function deploymentStatus(
  d: KubeObj,
  current: KubeObj | undefined,
  all: readonly KubeObj[],
  limits: Rollout,
  now: number,
): Record<string, unknown> {
  const available = sum(all, (rs) => numberAt(rs, 'status', 'availableReplicas'));
  const updated = current ? numberAt(current, 'status', 'replicas') : 0;
  const replicas = sum(all, (rs) => numberAt(rs, 'status', 'replicas'));
  const previous = ((d['status'] as { conditions?: Condition[] } | undefined)?.conditions ?? []) as Condition[];
  const time = `${new Date(now).toISOString().slice(0, 19)}Z`;
  const condition = (type: string, ok: boolean, reason: string, message: string): Condition => {
    const before = previous.find((c) => c.type === type);
    const status = ok ? 'True' : 'False';
    const same = before?.status === status && before.reason === reason;
    return {
      type,
      status,
      lastUpdateTime: same ? before.lastUpdateTime : time,
      lastTransitionTime: before?.status === status ? before.lastTransitionTime : time,
      reason,
      message,
    };
  };
  const isAvailable = available >= limits.desired - limits.maxUnavailable;
  const rsName = current?.metadata.name ?? `${d.metadata.name}`;
  const complete = current !== undefined && updated === limits.desired && replicas === updated && available >= updated;
  return {
    observedGeneration: Number(d.metadata['generation'] ?? 1),
    replicas,
    updatedReplicas: updated,
    readyReplicas: sum(all, (rs) => numberAt(rs, 'status', 'readyReplicas')),
    availableReplicas: available,
    ...(Math.max(0, sum(all, specReplicas) - available) > 0
      ? { unavailableReplicas: Math.max(0, sum(all, specReplicas) - available) }
      : {}),
    conditions: [
      isAvailable
        ? condition('Available', true, 'MinimumReplicasAvailable', 'Deployment has minimum availability.')
        : condition('Available', false, 'MinimumReplicasUnavailable', 'Deployment does not have minimum availability.'),
      complete
        ? condition(
            'Progressing',
            true,
            'NewReplicaSetAvailable',
            `ReplicaSet "${rsName}" has successfully progressed.`,
          )
        : condition('Progressing', true, 'ReplicaSetUpdated', `ReplicaSet "${rsName}" is progressing.`),
    ],
  };
}
