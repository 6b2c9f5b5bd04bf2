/**
 * The admission rules, pure over (pod, policy): each returns every violation as a FieldError
 * naming the field and the rule, never only the first. The mutating hook runs them before it
 * patches; the validating hook runs them again on the final object (another mutating webhook
 * may have run after ours) and guards `vcuda.io/` annotations on UPDATE.
 */
import {
  type FieldError,
  fieldError,
  isVcudaAnnotation,
  type PodGpuRequest,
  type PodLike,
  type QuantityPolicy,
  type ResourceNames,
  readPodGpuRequest,
  requestsGpu,
  sortFieldErrors,
  ValidationError,
  VCUDA_PREFIX,
} from '../contract/index.js';

/**
 * Set on every admitted vcuda pod. On Kubernetes without matchConditions it is what scopes the
 * validating hook (objectSelector) to vcuda pods, and it lets people list them (`-l vcuda.io/gpu`).
 */
export const VCUDA_POD_LABEL = 'vcuda.io/gpu';

export type AdmissionPolicy = {
  readonly quantity: QuantityPolicy;
  /** Users whose updates may touch `vcuda.io/` annotations (the control plane, the node agent). */
  readonly privilegedUsernames: ReadonlySet<string>;
};

function annotationField(key: string): string {
  return `metadata.annotations[${JSON.stringify(key)}]`;
}

function annotationsOf(pod: PodLike | null | undefined): Record<string, string> {
  return pod?.metadata?.annotations ?? {};
}

type LabelledPod = PodLike & { metadata?: { labels?: Record<string, string> | null } | null };

function labelsOf(pod: LabelledPod | null | undefined): Record<string, string> {
  return pod?.metadata?.labels ?? {};
}

/** Every `vcuda.io/` key added, changed or removed between two maps of one pod. */
function findReservedChanges(
  section: 'annotations' | 'labels',
  now: Record<string, string>,
  before: Record<string, string>,
  who: string,
): FieldError[] {
  const keys = new Set([...Object.keys(now), ...Object.keys(before)].filter(isVcudaAnnotation));
  const errors: FieldError[] = [];
  for (const key of keys) {
    if (now[key] === before[key]) continue;
    const change = before[key] === undefined ? 'added' : now[key] === undefined ? 'removed' : 'changed';
    errors.push(
      fieldError(
        `metadata.${section}[${JSON.stringify(key)}]`,
        'vcuda-annotation-reserved',
        `${change} by ${who}; the ${VCUDA_PREFIX} prefix is written by vcuda's own service accounts only ` +
          '(a control plane running as another identity must list it in webhook.privilegedUsernames, env VCUDA_WEBHOOK_PRIVILEGED_USERNAMES)',
      ),
    );
  }
  return errors;
}

/** Knobs users set under the resource domain; values the extender would silently ignore are refused. */
function checkKnobs(annotations: Record<string, string>, names: ResourceNames): FieldError[] {
  const errors: FieldError[] = [];
  const placement = annotations[names.placement];
  if (placement !== undefined && !['binpack', 'spread'].includes(placement.trim().toLowerCase())) {
    errors.push(
      fieldError(
        annotationField(names.placement),
        'placement-policy',
        `${JSON.stringify(placement)} must be "binpack" or "spread"`,
      ),
    );
  }
  const numa = annotations[names.singleNuma];
  if (numa !== undefined && !['true', 'false'].includes(numa.trim().toLowerCase())) {
    errors.push(
      fieldError(annotationField(names.singleNuma), 'boolean', `${JSON.stringify(numa)} must be "true" or "false"`),
    );
  }
  return errors;
}

/** Rules for a pod that asks for vcuda resources, as submitted (before or after mutation). */
export function validateGpuPod(pod: PodLike, policy: AdmissionPolicy): FieldError[] {
  return readGpuPod(pod, policy).errors;
}

/**
 * The rules and, when they all pass, the normalized request, in one pass over the pod (the
 * contract's reading is the expensive part of admission and runs once).
 */
export function readGpuPod(
  pod: PodLike,
  policy: AdmissionPolicy,
): { errors: FieldError[]; request: PodGpuRequest | undefined } {
  let request: PodGpuRequest | undefined;
  const errors: FieldError[] = [];
  try {
    request = readPodGpuRequest(pod, policy.quantity);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    errors.push(...err.errors);
  }
  errors.push(...checkKnobs(annotationsOf(pod), policy.quantity.names));
  const nodeName = pod.spec?.nodeName;
  if (nodeName) {
    errors.push(
      fieldError(
        'spec.nodeName',
        'node-name-preset',
        `${JSON.stringify(nodeName)} is preset; a vcuda pod must be placed by the vcuda scheduler extender, which picks its cards; remove spec.nodeName`,
      ),
    );
  }
  return errors.length > 0 ? { errors: sortFieldErrors(errors), request: undefined } : { errors, request };
}

/**
 * CREATE at the validating hook: the mutating hook has already stripped every `vcuda.io/`
 * annotation and label but its own, so one that is present now was added after it, and is refused.
 */
export function validateCreate(pod: LabelledPod, policy: AdmissionPolicy): FieldError[] {
  if (!requestsGpu(pod, policy.quantity.names)) return [];
  const forged = (section: 'annotations' | 'labels', keys: string[]) =>
    keys
      .filter((key) => isVcudaAnnotation(key) && !(section === 'labels' && key === VCUDA_POD_LABEL))
      .map((key) =>
        fieldError(
          `metadata.${section}[${JSON.stringify(key)}]`,
          'vcuda-annotation-reserved',
          `the ${VCUDA_PREFIX} prefix is written by vcuda only; remove it`,
        ),
      );
  return sortFieldErrors([
    ...validateGpuPod(pod, policy),
    ...forged('annotations', Object.keys(annotationsOf(pod))),
    ...forged('labels', Object.keys(labelsOf(pod))),
  ]);
}

/** Annotations a user may not change once a vcuda pod exists: what placement and limits were decided from. */
export function frozenUserKeys(names: ResourceNames): string[] {
  return [
    names.coreLimit,
    names.memoryLimit,
    names.gpuModelInclude,
    names.gpuModelExclude,
    names.gpuUuidInclude,
    names.gpuUuidExclude,
    names.placement,
    names.singleNuma,
  ];
}

/**
 * UPDATE of a vcuda pod: only privileged users (by `userInfo.username`) may add, change or remove
 * `vcuda.io/` annotations and labels; nobody may change the resource-domain knobs the pod was admitted with.
 */
export function validateUpdate(
  pod: LabelledPod,
  oldPod: LabelledPod,
  username: string | undefined,
  policy: AdmissionPolicy,
): FieldError[] {
  const names = policy.quantity.names;
  if (!requestsGpu(pod, names) && !requestsGpu(oldPod, names)) return [];
  const now = annotationsOf(pod);
  const before = annotationsOf(oldPod);
  const errors: FieldError[] = [];
  const isPrivileged = username !== undefined && policy.privilegedUsernames.has(username);
  if (!isPrivileged) {
    const who = JSON.stringify(username ?? '(unknown user)');
    errors.push(...findReservedChanges('annotations', now, before, who));
    errors.push(...findReservedChanges('labels', labelsOf(pod), labelsOf(oldPod), who));
  }
  for (const key of frozenUserKeys(names)) {
    if (now[key] === before[key]) continue;
    errors.push(
      fieldError(
        annotationField(key),
        'immutable-after-create',
        `cannot change from ${JSON.stringify(before[key] ?? null)} to ${JSON.stringify(now[key] ?? null)} on an existing pod; recreate the pod`,
      ),
    );
  }
  return sortFieldErrors(errors);
}
