/**
 * What kube-apiserver does to Deployments, ReplicaSets and Jobs on a write: apps/v1's and
 * batch/v1's defaults (SetDefaults_Deployment, SetDefaults_ReplicaSet, SetDefaults_Job, the pod
 * template's PodSpec defaults), the Job's generated selector and template labels, the validation
 * the controllers rely on (a selector that selects its own template, a Job's restart policy),
 * and `metadata.generation`, which moves with every change of `spec` and nothing else.
 */
import { type ApiError, invalid } from './api-status.js';
import { defaultContainer } from './object-defaults.js';
import { type KubeObject, type LabelSelector, matchLabelSelector } from './selectors.js';

export const WORKLOAD_RESOURCES = new Set(['deployments', 'replicasets', 'jobs']);

type Template = {
  metadata?: { labels?: Record<string, string>; [k: string]: unknown };
  spec?: { containers?: Record<string, unknown>[]; restartPolicy?: string; [k: string]: unknown };
};
type WorkloadSpec = {
  replicas?: number;
  selector?: LabelSelector;
  template?: Template;
  [k: string]: unknown;
};

const JOB_UID_LABEL = 'batch.kubernetes.io/controller-uid';
const JOB_NAME_LABEL = 'batch.kubernetes.io/job-name';

/** The PodSpec defaults a template gets (a pod's, without what only pod admission adds). */
function defaultTemplate(template: Template | undefined): Template {
  const spec = template?.spec ?? {};
  return {
    ...template,
    metadata: { ...(template?.metadata ?? {}) },
    spec: {
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      securityContext: {},
      schedulerName: 'default-scheduler',
      ...spec,
      containers: (spec.containers ?? []).map((c) => defaultContainer(c as never)),
    },
  };
}

function defaultDeploymentSpec(spec: WorkloadSpec): WorkloadSpec {
  const strategy = (spec['strategy'] ?? {}) as { type?: string; rollingUpdate?: Record<string, unknown> };
  const type = strategy.type || 'RollingUpdate';
  const rollingUpdate =
    type === 'RollingUpdate'
      ? { maxUnavailable: '25%', maxSurge: '25%', ...(strategy.rollingUpdate ?? {}) }
      : undefined;
  return {
    replicas: 1,
    revisionHistoryLimit: 10,
    progressDeadlineSeconds: 600,
    ...spec,
    strategy: { type, ...(rollingUpdate ? { rollingUpdate } : {}) },
    template: defaultTemplate(spec.template),
  };
}

function defaultJobSpec(spec: WorkloadSpec): WorkloadSpec {
  const both = spec['completions'] === undefined && spec['parallelism'] === undefined;
  return {
    parallelism: 1,
    ...(both ? { completions: 1 } : {}),
    backoffLimit: 6,
    completionMode: 'NonIndexed',
    suspend: false,
    podReplacementPolicy: 'TerminatingOrFailed',
    ...spec,
    template: defaultTemplate(spec.template),
  };
}

/** The spec's defaults, on create and on every update of the object itself. */
export function defaultWorkloadSpec(resource: string, obj: KubeObject): KubeObject {
  const spec = (obj['spec'] ?? {}) as WorkloadSpec;
  const defaulted =
    resource === 'deployments'
      ? defaultDeploymentSpec(spec)
      : resource === 'jobs'
        ? defaultJobSpec(spec)
        : { replicas: 1, ...spec, template: defaultTemplate(spec.template) };
  return { ...obj, spec: defaulted };
}

/** Defaults applied on create, before admission sees the object. */
export function defaultWorkload(resource: string, obj: KubeObject): KubeObject {
  const defaulted = defaultWorkloadSpec(resource, obj);
  return { ...defaulted, metadata: { ...obj.metadata, generation: 1 }, status: {} };
}

/**
 * A Job's selector and template labels name its uid (batch's generateSelector), so they are set
 * once the uid is; `manualSelector: true` leaves the user's own.
 */
export function withJobSelector(obj: KubeObject): KubeObject {
  const spec = obj['spec'] as WorkloadSpec;
  if (spec['manualSelector'] === true) return obj;
  const uid = String(obj.metadata['uid']);
  const name = obj.metadata.name;
  const labels = {
    ...(spec.template?.metadata?.labels ?? {}),
    [JOB_UID_LABEL]: uid,
    [JOB_NAME_LABEL]: name,
    'controller-uid': uid,
    'job-name': name,
  };
  const template = { ...spec.template, metadata: { ...(spec.template?.metadata ?? {}), labels } };
  return { ...obj, spec: { ...spec, selector: { matchLabels: { [JOB_UID_LABEL]: uid } }, template } };
}

/** The 422 a workload that its controller could not run gets; undefined when it is valid. */
export function validateWorkload(resource: string, kind: string, obj: KubeObject): ApiError | undefined {
  const spec = (obj['spec'] ?? {}) as WorkloadSpec;
  const causes: string[] = [];
  for (const field of ['replicas', 'parallelism', 'completions', 'backoffLimit']) {
    const v = spec[field];
    if (v !== undefined && v !== null && !(Number.isInteger(v) && (v as number) >= 0))
      causes.push(`spec.${field}: Invalid value: ${JSON.stringify(v)}: must be greater than or equal to 0`);
  }
  const labels = spec.template?.metadata?.labels ?? {};
  if (!spec.selector) causes.push('spec.selector: Required value');
  else if (Object.keys(spec.selector.matchLabels ?? {}).length + (spec.selector.matchExpressions ?? []).length === 0)
    causes.push('spec.selector: Invalid value: "null": empty selector is invalid for deployment');
  else if (!matchLabelSelector(spec.selector, labels))
    causes.push(
      `spec.template.metadata.labels: Invalid value: ${JSON.stringify(labels)}: \`selector\` does not match template \`labels\``,
    );
  const containers = spec.template?.spec?.containers ?? [];
  if (containers.length === 0) causes.push('spec.template.spec.containers: Required value');
  containers.forEach((c, i) => {
    if (!c['name']) causes.push(`spec.template.spec.containers[${i}].name: Required value`);
    if (!c['image']) causes.push(`spec.template.spec.containers[${i}].image: Required value`);
  });
  const restart = spec.template?.spec?.restartPolicy;
  if (resource === 'jobs' && restart !== 'Never' && restart !== 'OnFailure')
    causes.push(
      `spec.template.spec.restartPolicy: Unsupported value: "${restart}": supported values: "OnFailure", "Never"`,
    );
  if (resource !== 'jobs' && restart !== 'Always')
    causes.push(`spec.template.spec.restartPolicy: Unsupported value: "${restart}": supported values: "Always"`);
  return causes.length ? invalid(kind, obj.metadata.name, causes) : undefined;
}

/** On update: `generation` moves when `spec` changed; a selector never changes (apps/v1, batch/v1). */
export function updatedWorkload(kind: string, old: KubeObject, next: KubeObject): KubeObject | ApiError {
  const oldSpec = (old['spec'] ?? {}) as WorkloadSpec;
  const newSpec = (next['spec'] ?? {}) as WorkloadSpec;
  if (JSON.stringify(oldSpec.selector) !== JSON.stringify(newSpec.selector))
    return invalid(kind, old.metadata.name, [
      `spec.selector: Invalid value: ${JSON.stringify(newSpec.selector ?? null)}: field is immutable`,
    ]);
  const generation = Number(old.metadata['generation'] ?? 1);
  const changed = old['spec'] !== next['spec'] && JSON.stringify(oldSpec) !== JSON.stringify(newSpec);
  return { ...next, metadata: { ...next.metadata, generation: changed ? generation + 1 : generation } };
}
