/**
 * The admission rules for ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1) that ask
 * vcuda's DeviceClass, pure over (claim spec, policy): every violation as a FieldError naming the
 * field and the rule, never only the first, as for pods (validate.ts). A claim that names neither
 * the DeviceClass nor an opaque config for vcuda's driver is not vcuda's, and is not judged.
 *
 * What a request of the class may ask (`exactly`, or each `firstAvailable` alternative):
 * - `capacity.requests.cores`: hundredths of one card, a whole number 1..100 (100 = the whole
 *   card, exclusive and unthrottled);
 * - `capacity.requests.memory`: bytes, a whole positive quantity; required with a share (cores
 *   below 100), as `vcuda-memory` is for pods; memory without cores is refused;
 * - `count` above 1 (or `allocationMode: All`) only for whole cards: cores 100, or no capacity
 *   request at all (the device's whole capacity);
 * - no other capacity: the devices publish `cores` and `memory` only.
 * The opaque config for the driver must parse (contract/dra-parameters.ts, unknown fields
 * refused), and its `coreLimit` is at least the cores of every request it applies to.
 */
import {
  DRA_CAPACITY,
  type FieldError,
  fieldError,
  parseWholeQuantity,
  readGpuShareParameters,
  sortFieldErrors,
} from '../contract/index.js';

type QuantityMap = Record<string, string | number> | null | undefined;

/** One request for devices of one class, as `exactly` or as a `firstAvailable` alternative. */
export type ExactRequestLike = {
  deviceClassName?: string;
  allocationMode?: string;
  count?: number;
  capacity?: { requests?: QuantityMap } | null;
};

export type DeviceRequestLike = {
  name?: string;
  exactly?: ExactRequestLike | null;
  firstAvailable?: (ExactRequestLike & { name?: string })[] | null;
};

export type DeviceConfigLike = {
  requests?: string[] | null;
  opaque?: { driver?: string; parameters?: unknown } | null;
};

/** The parts of a ResourceClaimSpec vcuda reads. Extra fields are ignored. */
export type ClaimSpecLike = {
  devices?: { requests?: DeviceRequestLike[] | null; config?: DeviceConfigLike[] | null } | null;
};

export type ClaimPolicy = {
  /** The DeviceClass whose requests vcuda judges (`gpu.vcuda.io` by default). */
  readonly deviceClassName: string;
  /** The driver whose opaque config vcuda judges (`gpu.vcuda.io` by default). */
  readonly driverName: string;
};

/** One request of the class, normalized. */
export type ClaimShareRequest = {
  /** `gpu`, or `gpu/small` for a firstAvailable alternative. */
  readonly name: string;
  /** The request's name in the claim (`gpu` for `gpu/small`). */
  readonly parent: string;
  /** Hundredths of one card per device; 100 for whole cards (no capacity request). */
  readonly cores: number;
  /** Bytes per device; undefined: the whole card's. */
  readonly memoryBytes: number | undefined;
  /** Devices; `allocationMode: All` counts as 1 (the least it can be). */
  readonly count: number;
};

export type ClaimReading =
  | { kind: 'not-vcuda' }
  | { kind: 'refused'; errors: FieldError[] }
  | { kind: 'ok'; requests: ClaimShareRequest[]; alternativesOutsideClass: ReadonlySet<string> };

type Located = { name: string; parent: string; path: string; request: ExactRequestLike };

function locateClassRequests(spec: ClaimSpecLike, prefix: string, policy: ClaimPolicy): Located[] {
  const found: Located[] = [];
  (spec.devices?.requests ?? []).forEach((r, i) => {
    const parent = r.name ?? '';
    if (r.exactly?.deviceClassName === policy.deviceClassName) {
      found.push({ name: parent, parent, path: `${prefix}.devices.requests[${i}].exactly`, request: r.exactly });
    }
    (r.firstAvailable ?? []).forEach((s, j) => {
      if (s.deviceClassName !== policy.deviceClassName) return;
      const path = `${prefix}.devices.requests[${i}].firstAvailable[${j}]`;
      found.push({ name: `${parent}/${s.name ?? ''}`, parent, path, request: s });
    });
  });
  return found;
}

/** Requests with an alternative of another class: the claim may take that one instead. */
function alternativesOutside(spec: ClaimSpecLike, policy: ClaimPolicy): Set<string> {
  const outside = new Set<string>();
  for (const r of spec.devices?.requests ?? []) {
    if ((r.firstAvailable ?? []).some((s) => s.deviceClassName !== policy.deviceClassName)) outside.add(r.name ?? '');
  }
  return outside;
}

function readWhole(raw: string | number, path: string, errors: FieldError[]): number | undefined {
  const q = parseWholeQuantity(raw);
  if (q.ok) return q.value;
  const why = {
    fraction: 'is not a whole number',
    'too-large': 'is too large',
    syntax: 'is not a Kubernetes quantity',
  };
  errors.push(fieldError(path, 'whole-number', `${JSON.stringify(raw)} ${why[q.reason]}`));
  return undefined;
}

type Capacity = { cores: number | undefined; memoryBytes: number | undefined; named: ReadonlySet<string> };

function readCapacity({ path, request }: Located, errors: FieldError[]): Capacity {
  const requests = request.capacity?.requests ?? {};
  const at = (key: string) => `${path}.capacity.requests[${JSON.stringify(key)}]`;
  let cores: number | undefined;
  let memoryBytes: number | undefined;
  for (const [key, raw] of Object.entries(requests)) {
    if (key === DRA_CAPACITY.cores) {
      const value = readWhole(raw, at(key), errors);
      if (value !== undefined && (value < 1 || value > 100)) {
        const detail = `${value} must be 1..100 (hundredths of one card; 100 is the whole card)`;
        errors.push(fieldError(at(key), 'cores-range', detail));
      } else cores = value;
    } else if (key === DRA_CAPACITY.memory) {
      const value = readWhole(raw, at(key), errors);
      if (value !== undefined && value <= 0)
        errors.push(fieldError(at(key), 'memory-positive', `${value} must be positive`));
      else memoryBytes = value;
    } else {
      const detail = `vcuda's devices publish only "${DRA_CAPACITY.cores}" and "${DRA_CAPACITY.memory}"; remove ${JSON.stringify(key)}`;
      errors.push(fieldError(at(key), 'capacity-unknown', detail));
    }
  }
  return { cores, memoryBytes, named: new Set(Object.keys(requests)) };
}

/** The rules that tie cores, memory and count together; the values were read by readCapacity. */
function checkCombination(located: Located, capacity: Capacity, errors: FieldError[]): void {
  const { path, request } = located;
  const { cores, named } = capacity;
  const memoryPath = `${path}.capacity.requests[${JSON.stringify(DRA_CAPACITY.memory)}]`;
  if (named.has(DRA_CAPACITY.memory) && !named.has(DRA_CAPACITY.cores)) {
    errors.push(fieldError(memoryPath, 'memory-needs-cores', 'memory without cores is meaningless; request cores too'));
  }
  const isShare = cores !== undefined && cores < 100;
  if (isShare && !named.has(DRA_CAPACITY.memory)) {
    errors.push(fieldError(memoryPath, 'share-needs-memory', `a share of a card (cores: ${cores}) must state memory`));
  }
  // Only a readable share is judged here: whole cards may be counted, and a bad value is refused above.
  if (!isShare) return;
  if (request.allocationMode === 'All') {
    const detail =
      'allocationMode All takes every matching card; only whole cards (cores 100, or no capacity request) may';
    errors.push(fieldError(`${path}.allocationMode`, 'count-needs-whole-cards', detail));
  } else if ((request.count ?? 1) > 1) {
    const detail = `${request.count} cards of a share are not one share; ask whole cards (cores 100, or no capacity request) or one card`;
    errors.push(fieldError(`${path}.count`, 'count-needs-whole-cards', detail));
  }
}

function normalize(located: Located, capacity: Capacity): ClaimShareRequest {
  const count = located.request.allocationMode === 'All' ? 1 : (located.request.count ?? 1);
  return {
    name: located.name,
    parent: located.parent,
    cores: capacity.cores ?? 100,
    memoryBytes: capacity.memoryBytes,
    count,
  };
}

/** Does config `targets` (empty: all) apply to this request? `gpu` covers `gpu/small` too. */
function appliesTo(targets: readonly string[], request: ClaimShareRequest): boolean {
  return targets.length === 0 || targets.includes(request.name) || targets.includes(request.parent);
}

function checkConfigs(
  spec: ClaimSpecLike,
  prefix: string,
  policy: ClaimPolicy,
  requests: ClaimShareRequest[],
): FieldError[] {
  const errors: FieldError[] = [];
  (spec.devices?.config ?? []).forEach((config, k) => {
    if (config.opaque?.driver !== policy.driverName) return;
    const path = `${prefix}.devices.config[${k}].opaque.parameters`;
    const read = readGpuShareParameters(config.opaque.parameters, path);
    if (!read.ok) {
      errors.push(...read.errors);
      return;
    }
    const { coreLimit } = read.parameters;
    for (const r of requests) {
      if (!appliesTo(config.requests ?? [], r) || coreLimit >= r.cores) continue;
      const detail =
        r.cores === 100
          ? `${coreLimit} is below 100; request ${JSON.stringify(r.name)} asks whole cards, which are exclusive and unthrottled`
          : `${coreLimit} is below request ${JSON.stringify(r.name)}'s cores (${r.cores}); the limit is a ceiling at or above the share`;
      errors.push(fieldError(`${path}.coreLimit`, 'core-limit-at-least-request', detail));
    }
  });
  return errors;
}

/**
 * Judges one claim spec (`prefix`: `spec` for a ResourceClaim, `spec.spec` for a template's
 * claim). `not-vcuda` when it asks neither the class nor the driver's config.
 */
export function readClaimSpec(spec: ClaimSpecLike, prefix: string, policy: ClaimPolicy): ClaimReading {
  const located = locateClassRequests(spec, prefix, policy);
  const hasConfig = (spec.devices?.config ?? []).some((c) => c.opaque?.driver === policy.driverName);
  if (located.length === 0 && !hasConfig) return { kind: 'not-vcuda' };
  const errors: FieldError[] = [];
  const requests = located.map((l) => {
    const capacity = readCapacity(l, errors);
    checkCombination(l, capacity, errors);
    return normalize(l, capacity);
  });
  errors.push(...checkConfigs(spec, prefix, policy, requests));
  if (errors.length > 0) return { kind: 'refused', errors: sortFieldErrors(errors) };
  return { kind: 'ok', requests, alternativesOutsideClass: alternativesOutside(spec, policy) };
}
