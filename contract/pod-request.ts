/**
 * What a pod asks of vcuda, and every rule that request must meet.
 * `validatePodGpu` lists every violation; `readPodGpuRequest` returns the normalized request
 * that the webhook, the extender, the ledger and what-if planning all share.
 */
import { type FieldError, fieldError, sortFieldErrors, ValidationError } from './errors.js';
import { isMigResourceKey, migProfileOfResource } from './mig-resources.js';
import type { ResourceNames } from './names.js';
import { classifyCore, parseWholeQuantity } from './quantities.js';

/** The parts of a Kubernetes container vcuda reads. Extra fields are ignored. */
export type ContainerLike = {
  name: string;
  resources?: {
    limits?: Record<string, string | number> | null;
    requests?: Record<string, string | number> | null;
  } | null;
};

/** The parts of a Kubernetes pod vcuda reads. */
export type PodLike = {
  metadata?: { name?: string; namespace?: string; uid?: string; annotations?: Record<string, string> | null } | null;
  spec?: { containers?: ContainerLike[] | null; initContainers?: ContainerLike[] | null; nodeName?: string } | null;
};

export type QuantityPolicy = {
  readonly names: ResourceNames;
  /** Size of one `vcuda-memory` unit in MiB (1 by default; 256 for gpu-manager compatibility). */
  readonly memoryUnitMiB: number;
};

export type ComputeMode = 'hard' | 'soft';

/** One container's normalized GPU request. Per card: a share asks one card, whole asks `cards` cards. */
export type ContainerGpuRequest = {
  readonly name: string;
  readonly isInit: boolean;
  /** Hundredths of one card, per card: 1..99 for a share, 100 for whole cards. */
  readonly corePerCard: number;
  readonly cards: number;
  /** Per card; undefined means the card's whole memory (whole cards only). */
  readonly memoryMiBPerCard: number | undefined;
  /** Ceiling per card, 1..100; equal to corePerCard in hard mode. */
  readonly coreLimit: number;
  readonly mode: ComputeMode;
  /**
   * Burst ceiling per card (the memory-limit annotation), above memoryMiBPerCard; undefined: no
   * burst. Never counted toward fit: only memoryMiBPerCard is reserved.
   */
  readonly memoryLimitMiBPerCard?: number | undefined;
  /**
   * Whole MIG instances of this GPU-instance profile (`3g.40gb`, from `<domain>/mig-3g.40gb`):
   * `cards` of them, each held whole (all its memory, never throttled; quotas charge the part of
   * its card it spans). Absent: cards.
   */
  readonly mig?: string | undefined;
};

export type PodGpuRequest = {
  readonly containers: readonly ContainerGpuRequest[];
};

type RawContainerRequest = { core?: number; memoryUnits?: number; mig?: { profile: string; count: number } };

function resourcePath(prefix: string, section: 'limits' | 'requests', key: string): string {
  return `${prefix}.resources.${section}[${JSON.stringify(key)}]`;
}

function readQuantity(raw: string | number | undefined, path: string, errors: FieldError[]): number | undefined {
  if (raw === undefined) return undefined;
  const q = parseWholeQuantity(raw);
  if (!q.ok) {
    const detail =
      q.reason === 'fraction'
        ? `${JSON.stringify(raw)} is not a whole number`
        : q.reason === 'too-large'
          ? `${JSON.stringify(raw)} is too large`
          : `${JSON.stringify(raw)} is not a Kubernetes quantity`;
    errors.push(fieldError(path, 'whole-number', detail));
    return undefined;
  }
  return q.value;
}

/** True when the container's limits or requests name `key`, whatever its value. */
function namesResource(container: ContainerLike, key: string): boolean {
  return container.resources?.limits?.[key] !== undefined || container.resources?.requests?.[key] !== undefined;
}

function readContainer(
  container: ContainerLike,
  prefix: string,
  policy: QuantityPolicy,
  errors: FieldError[],
): RawContainerRequest {
  const out: RawContainerRequest = {};
  const { core: coreKey, memory: memoryKey } = policy.names;
  for (const [key, field] of [
    [coreKey, 'core'],
    [memoryKey, 'memoryUnits'],
  ] as const) {
    const read = readResource(container, prefix, key, errors);
    if (!read) continue;
    const { value, path } = read;
    if (field === 'core') {
      if (value <= 0) {
        errors.push(fieldError(path, 'core-positive', `${value} must be a positive integer`));
      } else if (!classifyCore(value)) {
        errors.push(fieldError(path, 'core-share-or-whole', `${value} is neither below 100 nor a multiple of 100`));
      } else out.core = value;
    } else if (value <= 0) {
      errors.push(fieldError(path, 'memory-positive', `${value} must be a positive number of memory units`));
    } else out.memoryUnits = value;
  }
  if (out.memoryUnits !== undefined && !namesResource(container, coreKey)) {
    errors.push(
      fieldError(
        resourcePath(prefix, 'limits', memoryKey),
        'memory-needs-core',
        `memory without ${coreKey} is meaningless; request ${coreKey} too`,
      ),
    );
  }
  if (out.core !== undefined && out.core < 100 && !namesResource(container, memoryKey)) {
    errors.push(
      fieldError(
        resourcePath(prefix, 'limits', memoryKey),
        'share-needs-memory',
        `a share of a card (${coreKey}: ${out.core}) must state ${memoryKey}`,
      ),
    );
  }
  const mig = readMig(container, prefix, policy.names, errors);
  if (mig) out.mig = mig;
  return out;
}

/**
 * One extended resource of a container: its value and the path that names it, or undefined when
 * it is absent or broken (each break is one error).
 */
function readResource(
  container: ContainerLike,
  prefix: string,
  key: string,
  errors: FieldError[],
): { value: number; path: string } | undefined {
  const lim = container.resources?.limits?.[key];
  const req = container.resources?.requests?.[key];
  // kube-apiserver refuses an extended resource named in requests alone ("Limit must be set for
  // non overcommitable resources"); it fills requests from limits, never the other way round.
  if (req !== undefined && lim === undefined) {
    errors.push(
      fieldError(
        resourcePath(prefix, 'limits', key),
        'limit-required',
        `must be set: ${key} is in requests only, and the API server refuses an extended resource without a limit; put it in limits (requests may be left out)`,
      ),
    );
  }
  const limit = readQuantity(lim, resourcePath(prefix, 'limits', key), errors);
  // The API server copies limits into requests: one bad value is one violation, not two.
  const request =
    req !== undefined && String(req) === String(lim)
      ? limit
      : readQuantity(req, resourcePath(prefix, 'requests', key), errors);
  if (limit !== undefined && request !== undefined && limit !== request) {
    errors.push(
      fieldError(
        resourcePath(prefix, 'requests', key),
        'requests-equal-limits',
        `request ${request} differs from limit ${limit}; vcuda resources cannot be overcommitted, set them equal`,
      ),
    );
  }
  const value = limit ?? request;
  if (value === undefined) return undefined;
  return { value, path: resourcePath(prefix, lim !== undefined ? 'limits' : 'requests', key) };
}

/** The container's MIG resource keys (`<domain>/mig-…`), in limits or requests, sorted. */
function migKeysOf(container: ContainerLike, names: ResourceNames): string[] {
  const keys = new Set<string>();
  for (const section of [container.resources?.limits, container.resources?.requests]) {
    for (const key of Object.keys(section ?? {})) if (isMigResourceKey(names, key)) keys.add(key);
  }
  return [...keys].sort();
}

/**
 * Whole MIG instances the container asks: one profile, a whole count of at least one, and no
 * vcuda-core or vcuda-memory beside it (a whole instance is not a share, and one container gets
 * one kind of GPU: shares inside an instance are a later feature).
 */
function readMig(
  container: ContainerLike,
  prefix: string,
  names: ResourceNames,
  errors: FieldError[],
): { profile: string; count: number } | undefined {
  const keys = migKeysOf(container, names);
  if (keys.length === 0) return undefined;
  let found: { profile: string; count: number } | undefined;
  const before = errors.length;
  for (const key of keys) {
    const profile = migProfileOfResource(names, key);
    if (profile === undefined) {
      errors.push(
        fieldError(
          resourcePath(prefix, 'limits', key),
          'mig-profile-name',
          `${key} names no MIG profile; write ${names.migPrefix}<g>g.<mem>gb as NVIDIA names it (e.g. ${names.migPrefix}3g.40gb, ${names.migPrefix}1g.10gb.me)`,
        ),
      );
      continue;
    }
    const read = readResource(container, prefix, key, errors);
    if (!read) continue;
    if (read.value < 1) {
      errors.push(fieldError(read.path, 'mig-count-positive', `${read.value} must be a whole count of at least 1`));
      continue;
    }
    found ??= { profile, count: read.value };
  }
  if (keys.length > 1) {
    errors.push(
      fieldError(
        resourcePath(prefix, 'limits', keys[1] as string),
        'one-mig-profile',
        `asks ${keys.join(' and ')}; a container takes instances of one MIG profile (give each profile its own container)`,
      ),
    );
  }
  for (const key of [names.core, names.memory]) {
    if (!namesResource(container, key)) continue;
    errors.push(
      fieldError(
        resourcePath(prefix, 'limits', key),
        'mig-alone',
        `${key} beside ${keys[0]}: a container takes whole MIG instances or vcuda shares, not both; to share an instance, the node agent names it in mig.shared and containers ask vcuda-core/vcuda-memory`,
      ),
    );
  }
  return errors.length === before ? found : undefined;
}

type Indexed = { container: ContainerLike; prefix: string; isInit: boolean };

function listContainers(pod: PodLike): Indexed[] {
  const init = (pod.spec?.initContainers ?? []).map((container, i) => ({
    container,
    prefix: `spec.initContainers[${i}]`,
    isInit: true,
  }));
  const main = (pod.spec?.containers ?? []).map((container, i) => ({
    container,
    prefix: `spec.containers[${i}]`,
    isInit: false,
  }));
  return [...init, ...main];
}

/** Reads and checks the core-limit annotation; undefined when absent. */
function readCoreLimit(pod: PodLike, policy: QuantityPolicy, errors: FieldError[]): number | undefined {
  const key = policy.names.coreLimit;
  const raw = pod.metadata?.annotations?.[key];
  if (raw === undefined) return undefined;
  const path = `metadata.annotations[${JSON.stringify(key)}]`;
  const value = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(value) || value < 1 || value > 100) {
    errors.push(fieldError(path, 'core-limit-range', `${JSON.stringify(raw)} must be an integer from 1 to 100`));
    return undefined;
  }
  return value;
}

/** Reads and checks the memory-limit annotation (memory units); undefined when absent. */
function readMemoryLimit(pod: PodLike, policy: QuantityPolicy, errors: FieldError[]): number | undefined {
  const key = policy.names.memoryLimit;
  const raw = pod.metadata?.annotations?.[key];
  if (raw === undefined) return undefined;
  const path = `metadata.annotations[${JSON.stringify(key)}]`;
  const value = readQuantity(raw, path, errors);
  if (value === undefined) return undefined;
  if (value <= 0) {
    errors.push(fieldError(path, 'memory-positive', `${value} must be a positive number of memory units`));
    return undefined;
  }
  return value;
}

/** The container's burst ceiling per card in MiB, or an error when it is below the request. */
function memoryLimitOf(
  limitUnits: number | undefined,
  memoryUnits: number | undefined,
  container: ContainerLike,
  policy: QuantityPolicy,
  errors: FieldError[],
): number | undefined {
  // Whole cards without a memory request already own the card's memory: nothing to burst into.
  if (limitUnits === undefined || memoryUnits === undefined) return undefined;
  if (limitUnits < memoryUnits) {
    errors.push(
      fieldError(
        `metadata.annotations[${JSON.stringify(policy.names.memoryLimit)}]`,
        'memory-limit-at-least-request',
        `${limitUnits} is below ${container.name}'s request of ${memoryUnits}`,
      ),
    );
    return undefined;
  }
  return limitUnits > memoryUnits ? limitUnits * policy.memoryUnitMiB : undefined;
}

function check(pod: PodLike, policy: QuantityPolicy): { errors: FieldError[]; request: PodGpuRequest } {
  const errors: FieldError[] = [];
  const coreLimitAnnotation = readCoreLimit(pod, policy, errors);
  const memoryLimitAnnotation = readMemoryLimit(pod, policy, errors);
  const containers: ContainerGpuRequest[] = [];
  const all = listContainers(pod);
  const hasShare = all.some(({ container }) => {
    const raw = container.resources?.limits?.[policy.names.core] ?? container.resources?.requests?.[policy.names.core];
    const q = parseWholeQuantity(raw);
    return q.ok && classifyCore(q.value)?.kind === 'share';
  });
  for (const { container, prefix, isInit } of all) {
    const before = errors.length;
    const raw = readContainer(container, prefix, policy, errors);
    if (raw.mig) {
      // A whole instance is held whole and never throttled: the pod's limit annotations do not apply.
      containers.push({
        name: container.name,
        isInit,
        corePerCard: 100,
        cards: raw.mig.count,
        memoryMiBPerCard: undefined,
        coreLimit: 100,
        mode: 'hard',
        mig: raw.mig.profile,
      });
      continue;
    }
    if (raw.core === undefined) continue;
    // A container with another problem is still checked against the limit, so one refusal lists all.
    const containerValid = errors.length === before;
    const core = classifyCore(raw.core);
    if (!core) continue;
    const corePerCard = core.kind === 'share' ? core.percent : 100;
    // The annotation caps shares; whole cards are exclusive and never throttled, unless the pod
    // has only whole cards, where a limit below 100 would silently do nothing and is refused.
    const coreLimit = core.kind === 'whole' && hasShare ? 100 : (coreLimitAnnotation ?? corePerCard);
    if (coreLimit < corePerCard) {
      errors.push(
        fieldError(
          `metadata.annotations[${JSON.stringify(policy.names.coreLimit)}]`,
          'core-limit-at-least-request',
          `${coreLimit} is below ${container.name}'s request of ${corePerCard} per card`,
        ),
      );
      continue;
    }
    const limitErrors = errors.length;
    const memoryLimitMiBPerCard = memoryLimitOf(memoryLimitAnnotation, raw.memoryUnits, container, policy, errors);
    if (!containerValid || errors.length !== limitErrors) continue;
    containers.push({
      name: container.name,
      isInit,
      corePerCard,
      cards: core.kind === 'share' ? 1 : core.cards,
      memoryMiBPerCard: raw.memoryUnits === undefined ? undefined : raw.memoryUnits * policy.memoryUnitMiB,
      coreLimit,
      mode: coreLimit > corePerCard ? 'soft' : 'hard',
      ...(memoryLimitMiBPerCard === undefined ? {} : { memoryLimitMiBPerCard }),
    });
  }
  return { errors: sortFieldErrors(errors), request: { containers } };
}

/** Every violation of vcuda's rules in this pod; empty when valid (or when it asks for no GPU). */
export function validatePodGpu(pod: PodLike, policy: QuantityPolicy): FieldError[] {
  return check(pod, policy).errors;
}

/** The pod's normalized request; throws ValidationError listing every violation. */
export function readPodGpuRequest(pod: PodLike, policy: QuantityPolicy): PodGpuRequest {
  const { errors, request } = check(pod, policy);
  if (errors.length > 0) {
    const name = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
    throw new ValidationError(errors, `pod ${name}`);
  }
  return request;
}

/**
 * Everything readPodGpuRequest reads of a pod, as one string: two pods with the same key ask the
 * same (or fail alike). Lets a caller that judged a pod's request once skip judging it again when
 * a later copy (a watch event that changed only its status or annotations) asks the same.
 */
export function gpuRequestInputsOf(pod: PodLike, policy: QuantityPolicy): string {
  const annotations = pod.metadata?.annotations;
  const containers = (list: readonly ContainerLike[] | null | undefined) =>
    (list ?? []).map((c) => [c.name, c.resources?.limits ?? null, c.resources?.requests ?? null]);
  return JSON.stringify([
    annotations?.[policy.names.coreLimit] ?? null,
    annotations?.[policy.names.memoryLimit] ?? null,
    containers(pod.spec?.initContainers),
    containers(pod.spec?.containers),
  ]);
}

/** True when any container (init included) names a vcuda resource or a whole MIG instance. */
export function requestsGpu(pod: PodLike, names: ResourceNames): boolean {
  return listContainers(pod).some(
    ({ container }) =>
      [names.core, names.memory].some((k) => namesResource(container, k)) || migKeysOf(container, names).length > 0,
  );
}
