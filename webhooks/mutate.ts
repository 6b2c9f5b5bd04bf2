/**
 * The mutating rules, pure over (pod, policy): refuse a pod that breaks the rules (every
 * violation listed), otherwise return the JSON Patch that strips forged `vcuda.io/` annotations,
 * makes the compute limit explicit and points the pod at the vcuda scheduler profile.
 */
import {
  type FieldError,
  isVcudaAnnotation,
  type PodGpuRequest,
  type PodLike,
  requestsGpu,
} from '../contract/index.js';
import { annotationPath, escapePointerToken, type JsonPatchOp } from './json-patch.js';
import { type ClaimTemplate, convertPodToClaims, convertsToClaims, type DraPodPolicy } from './pod-claims.js';
import { type AdmissionPolicy, readGpuPod, VCUDA_POD_LABEL } from './validate.js';

export { VCUDA_POD_LABEL };

export type MutationPolicy = AdmissionPolicy & {
  /** The scheduler profile that calls the vcuda extender; unset leaves spec.schedulerName alone. */
  readonly schedulerName?: string | undefined;
  /** Set on a cluster served in DRA mode: pods it selects are admitted with claims (pod-claims.ts). */
  readonly dra?: DraPodPolicy | undefined;
};

export type MutationResult =
  | { kind: 'not-vcuda' }
  | { kind: 'refused'; errors: FieldError[]; warnings: string[] }
  | {
      kind: 'admitted';
      patch: JsonPatchOp[];
      warnings: string[];
      request: PodGpuRequest;
      /** DRA mode: the templates the pod's claims are made from, to exist before it is allowed. */
      templates?: ClaimTemplate[];
    };

const DEFAULT_SCHEDULER = 'default-scheduler';

type MutablePod = PodLike & {
  metadata?: { labels?: Record<string, string> | null } | null;
  spec?: { schedulerName?: string; resourceClaims?: unknown; nodeSelector?: unknown } | null;
};

function labelPath(key: string): string {
  return `/metadata/labels/${escapePointerToken(key)}`;
}

function withoutVcudaAnnotations(pod: PodLike): PodLike {
  const annotations = pod.metadata?.annotations;
  if (!annotations) return pod;
  const kept = Object.fromEntries(Object.entries(annotations).filter(([k]) => !isVcudaAnnotation(k)));
  return { ...pod, metadata: { ...pod.metadata, annotations: kept } };
}

/**
 * The hard limit that equals the request, when one annotation can say it: the shares' common
 * size (whole cards are never throttled when a pod mixes them with shares), or 100 for a pod of
 * whole cards only. Shares of different sizes cannot share one value: the annotation stays
 * absent, which the contract reads as "each container at its own request".
 */
export function chooseHardCoreLimit(request: PodGpuRequest): number | undefined {
  // Whole MIG instances are never throttled and the annotation does not apply to them.
  const cards = request.containers.filter((c) => c.mig === undefined);
  const shares = cards.filter((c) => c.corePerCard < 100);
  const sizes = new Set((shares.length > 0 ? shares : cards).map((c) => c.corePerCard));
  return sizes.size === 1 ? [...sizes][0] : undefined;
}

/** Removes every `vcuda.io/` label but ours, one warning each. */
function forgedLabelOps(labels: Record<string, string> | undefined, warnings: string[]): JsonPatchOp[] {
  const forged = Object.keys(labels ?? {}).filter((k) => isVcudaAnnotation(k) && k !== VCUDA_POD_LABEL);
  return forged.sort().map((k) => {
    warnings.push(`removed label ${k}: the vcuda.io/ prefix is written by vcuda only`);
    return { op: 'remove', path: labelPath(k) };
  });
}

/**
 * CREATE of a pod: the decision and, when admitted, its patch. `namespace` is the review's (a
 * pod being created may not carry it yet); it names where a DRA pod's claim templates live.
 */
export function mutatePodCreate(pod: MutablePod, policy: MutationPolicy, namespace?: string): MutationResult {
  const names = policy.quantity.names;
  if (!requestsGpu(pod, names)) return { kind: 'not-vcuda' };

  const annotations = pod.metadata?.annotations ?? undefined;
  const forgedKeys = Object.keys(annotations ?? {})
    .filter(isVcudaAnnotation)
    .sort();
  const warnings = forgedKeys.map((k) => `removed annotation ${k}: the vcuda.io/ prefix is written by vcuda only`);
  // Copy the pod only when there is something to strip (almost never: the API server's pods carry none).
  const clean = forgedKeys.length > 0 ? withoutVcudaAnnotations(pod) : pod;

  const { errors, request } = readGpuPod(clean, policy);
  if (!request) return { kind: 'refused', errors, warnings };

  const patch: JsonPatchOp[] = forgedKeys.map((k) => ({ op: 'remove', path: annotationPath(k) }));
  const labels = pod.metadata?.labels ?? undefined;
  if (policy.dra && convertsToClaims(pod, policy.dra)) {
    // DRA mode: the claims carry the shape and the limit; kube-scheduler places the pod.
    patch.push(...forgedLabelOps(labels, warnings));
    const ns = namespace ?? pod.metadata?.namespace ?? 'default';
    const moved = convertPodToClaims(pod, request, names, { ...policy.dra, namespace: ns });
    patch.push(...moved.patch);
    warnings.push(...moved.warnings);
    return { kind: 'admitted', patch, warnings, request, templates: moved.templates };
  }
  if (annotations?.[names.coreLimit] === undefined) {
    const limit = chooseHardCoreLimit(request);
    if (limit !== undefined) {
      // `add` needs the parent: create the whole map when the pod has none.
      patch.push(
        annotations
          ? { op: 'add', path: annotationPath(names.coreLimit), value: String(limit) }
          : { op: 'add', path: '/metadata/annotations', value: { [names.coreLimit]: String(limit) } },
      );
    }
  }

  patch.push(...forgedLabelOps(labels, warnings));
  if (labels?.[VCUDA_POD_LABEL] !== 'true') {
    patch.push(
      labels
        ? { op: 'add', path: labelPath(VCUDA_POD_LABEL), value: 'true' }
        : { op: 'add', path: '/metadata/labels', value: { [VCUDA_POD_LABEL]: 'true' } },
    );
  }

  const wanted = policy.schedulerName;
  const current = pod.spec?.schedulerName;
  if (wanted && current !== wanted) {
    if (current === undefined || current === DEFAULT_SCHEDULER) {
      patch.push({ op: current === undefined ? 'add' : 'replace', path: '/spec/schedulerName', value: wanted });
    } else {
      warnings.push(`spec.schedulerName ${JSON.stringify(current)} kept; vcuda places pods through "${wanted}"`);
    }
  }
  warnings.push(...burstWarnings(request));
  return { kind: 'admitted', patch, warnings, request };
}

/**
 * One warning per bursting container: what it may hold above its request is evictable, and once
 * evicted it lives in host memory that vcuda does not reserve (README, "Memory above the request").
 */
export function burstWarnings(request: PodGpuRequest): string[] {
  return request.containers.flatMap((c) =>
    c.memoryLimitMiBPerCard !== undefined && c.memoryMiBPerCard !== undefined
      ? [
          `burst: ${c.name} may hold ${c.memoryLimitMiBPerCard - c.memoryMiBPerCard} MiB/card above its request, evictable to host RAM vcuda does not reserve`,
        ]
      : [],
  );
}
