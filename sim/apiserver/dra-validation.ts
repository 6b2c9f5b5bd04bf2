/**
 * What kube-apiserver 1.36 does to `resource.k8s.io/v1` objects on a write, as far as vcuda's
 * claims, classes and slices reach (each rule and message checked against the real server):
 * request defaults (`allocationMode: ExactCount`, `count: 1`), quantities written back in
 * canonical form (`8000M` → `8G`) and refused with 400 when they are not quantities, request
 * names, `exactly` xor `firstAvailable`, constraints naming real requests, an immutable claim spec,
 * a status whose allocation names the claim's requests, is set once and carries UUID shareIDs,
 * `reservedFor` only on an allocated claim; a slice's driver, pool and node, unique device names,
 * a requestPolicy only on a device that allows several allocations, counter sets apart from
 * devices and within the API's limits (partitionable devices); a class selector's CEL
 * present. CEL itself is not compiled here (the simulated scheduler refuses what it cannot read).
 */
import { canonicalDraQuantity, parseDraQuantity } from '../../contract/dra-quantity.js';
import { type ApiError, badRequest, invalid } from './api-status.js';
import type { KubeObject } from './selectors.js';

export const DRA_RESOURCES = new Set(['deviceclasses', 'resourceclaims', 'resourceclaimtemplates', 'resourceslices']);

type Json = Record<string, unknown>;
type Request = { name?: unknown; exactly?: Json; firstAvailable?: Json[] };
type ClaimSpecJson = { devices?: { requests?: Request[]; constraints?: { requests?: unknown[] }[] } };

const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const QUANTITY_RULE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const LABEL_RULE =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_RULE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const REQUEST_NAME_RULE =
  "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";

/** A map of quantities in canonical form; a 400 naming the kind when one is not a quantity. */
function canonicalMap(map: unknown, kind: string): unknown {
  if (!map || typeof map !== 'object') return map;
  const out: Json = {};
  for (const [k, v] of Object.entries(map as Json)) {
    if (!parseDraQuantity(v))
      throw badRequest(`${kind} in version "v1" cannot be handled as a ${kind}: ${QUANTITY_RULE}`);
    out[k] = canonicalDraQuantity(v);
  }
  return out;
}

/** An `exactly` request (or a subrequest) with kube-apiserver's defaults. */
function defaultExact(exact: Json, kind: string): Json {
  const mode = (exact['allocationMode'] as string | undefined) ?? 'ExactCount';
  const capacity = exact['capacity'] as { requests?: unknown } | undefined;
  return {
    ...exact,
    allocationMode: mode,
    ...(mode === 'ExactCount' ? { count: exact['count'] ?? 1 } : {}),
    ...(capacity?.requests ? { capacity: { ...capacity, requests: canonicalMap(capacity.requests, kind) } } : {}),
  };
}

function defaultClaimSpec(spec: ClaimSpecJson | undefined, kind: string): ClaimSpecJson | undefined {
  const requests = spec?.devices?.requests;
  if (!Array.isArray(requests)) return spec;
  const defaulted = requests.map((r) => ({
    ...r,
    ...(r.exactly ? { exactly: defaultExact(r.exactly, kind) } : {}),
    ...(Array.isArray(r.firstAvailable) ? { firstAvailable: r.firstAvailable.map((s) => defaultExact(s, kind)) } : {}),
  }));
  return { ...spec, devices: { ...spec?.devices, requests: defaulted } };
}

/** A slice's devices with their capacities and request policies in canonical form. */
function defaultSliceSpec(spec: Json | undefined): Json | undefined {
  const devices = spec?.['devices'];
  if (!Array.isArray(devices)) return spec;
  const canonical = (v: unknown) => {
    if (v !== undefined && !parseDraQuantity(v))
      throw badRequest(`ResourceSlice in version "v1" cannot be handled as a ResourceSlice: ${QUANTITY_RULE}`);
    return canonicalDraQuantity(v);
  };
  const out = devices.map((d: Json) => {
    const capacity = d['capacity'] as Record<string, { value?: unknown; requestPolicy?: Json }> | undefined;
    if (!capacity) return d;
    const caps: Json = {};
    for (const [name, c] of Object.entries(capacity)) {
      const range = c.requestPolicy?.['validRange'] as Json | undefined;
      const policy = c.requestPolicy && {
        ...c.requestPolicy,
        ...(c.requestPolicy['default'] !== undefined ? { default: canonical(c.requestPolicy['default']) } : {}),
        ...(range ? { validRange: Object.fromEntries(Object.entries(range).map(([k, v]) => [k, canonical(v)])) } : {}),
      };
      caps[name] = { ...c, value: canonical(c.value), ...(policy ? { requestPolicy: policy } : {}) };
    }
    return { ...d, capacity: caps };
  });
  return { ...spec, devices: out };
}

/**
 * Defaults and canonical quantities of a DRA object on create or update (`old`); a claim is
 * created without status, as kube-apiserver drops it there.
 */
export function defaultDraObject(resource: string, obj: KubeObject, old?: KubeObject): KubeObject {
  if (resource === 'resourceclaims') {
    const spec = defaultClaimSpec(obj['spec'] as ClaimSpecJson, 'ResourceClaim');
    if (old) return { ...obj, spec };
    const { status: _dropped, ...rest } = obj;
    return { ...rest, spec } as KubeObject;
  }
  if (resource === 'resourceclaimtemplates') {
    const spec = (obj['spec'] ?? {}) as { spec?: ClaimSpecJson };
    return { ...obj, spec: { ...spec, spec: defaultClaimSpec(spec.spec, 'ResourceClaimTemplate') } };
  }
  if (resource === 'resourceslices') {
    const spec = defaultSliceSpec(obj['spec'] as Json | undefined);
    const changed = old && JSON.stringify(old['spec']) !== JSON.stringify(spec);
    const generation = old ? Number(old.metadata['generation'] ?? 1) + (changed ? 1 : 0) : 1;
    return { ...obj, spec, metadata: { ...obj.metadata, generation } };
  }
  return obj;
}

/** The problems of a claim spec (`at`: `spec` or, in a template, `spec.spec`). */
function claimSpecCauses(spec: ClaimSpecJson | undefined, at: string): string[] {
  const causes: string[] = [];
  const requests = spec?.devices?.requests ?? [];
  const names = new Set<string>();
  requests.forEach((r, i) => {
    const path = `${at}.devices.requests[${i}]`;
    const name = String(r.name ?? '');
    if (!LABEL.test(name) || name.length > 63) causes.push(`${path}.name: Invalid value: "${name}": ${LABEL_RULE}`);
    else if (names.has(name)) causes.push(`${path}: Duplicate value: "${name}"`);
    names.add(name);
    if (r.exactly && r.firstAvailable)
      causes.push(
        `${path}: Invalid value: null: exactly one of \`exactly\` or \`firstAvailable\` is required, but multiple fields are set`,
      );
    else if (!r.exactly && !r.firstAvailable)
      causes.push(`${path}: Required value: exactly one of \`exactly\` or \`firstAvailable\` is required`);
    if (r.exactly) causes.push(...exactCauses(r.exactly, `${path}.exactly`));
  });
  (spec?.devices?.constraints ?? []).forEach((c, i) => {
    (c.requests ?? []).forEach((name, j) => {
      const base = String(name).split('/')[0]!;
      if (!names.has(base))
        causes.push(
          `${at}.devices.constraints[${i}].requests[${j}]: Invalid value: "${String(name)}": ${REQUEST_NAME_RULE}`,
        );
    });
  });
  return causes;
}

function exactCauses(exact: Json, path: string): string[] {
  const causes: string[] = [];
  if (!exact['deviceClassName']) causes.push(`${path}.deviceClassName: Required value`);
  const mode = exact['allocationMode'];
  if (mode !== 'All' && mode !== 'ExactCount')
    causes.push(`${path}.allocationMode: Unsupported value: "${String(mode)}": supported values: "All", "ExactCount"`);
  if (mode === 'All' && exact['count'] !== undefined)
    causes.push(
      `${path}.count: Invalid value: ${String(exact['count'])}: must not be specified when allocationMode is 'All'`,
    );
  return causes;
}

/** The problems of a claim's status, given the claim (its requests) and the status before. */
function claimStatusCauses(claim: KubeObject, old: KubeObject | undefined): string[] {
  const causes: string[] = [];
  type Status = { allocation?: { devices?: { results?: Json[] } }; reservedFor?: unknown[] };
  const status = (claim['status'] ?? {}) as Status;
  const before = (old?.['status'] ?? {}) as Status;
  const names = new Set(((claim['spec'] as ClaimSpecJson)?.devices?.requests ?? []).map((r) => String(r.name)));
  if (status.reservedFor?.length && !status.allocation)
    causes.push('status.reservedFor: Forbidden: may not be specified when `allocated` is not set');
  if (before.allocation && status.allocation && JSON.stringify(before.allocation) !== JSON.stringify(status.allocation))
    causes.push(`status.allocation: Invalid value: ${JSON.stringify(status.allocation)}: field is immutable`);
  (status.allocation?.devices?.results ?? []).forEach((r, i) => {
    const path = `status.allocation.devices.results[${i}]`;
    const request = String(r['request'] ?? '');
    if (!names.has(request.split('/')[0]!))
      causes.push(`${path}.request: Invalid value: "${request}": ${REQUEST_NAME_RULE}`);
    const share = r['shareID'];
    if (share !== undefined && !UUID.test(String(share)))
      causes.push(
        `${path}.shareID: Invalid value: "${String(share)}": error validating uid: invalid UUID length: ${String(share).length}`,
      );
  });
  return causes;
}

function sliceCauses(spec: Json): string[] {
  const causes: string[] = [];
  const driver = spec['driver'];
  if (!driver) causes.push('spec.driver: Required value');
  else if (!SUBDOMAIN.test(String(driver)))
    causes.push(`spec.driver: Invalid value: "${String(driver)}": ${SUBDOMAIN_RULE}`);
  const pool = (spec['pool'] ?? {}) as { name?: string; generation?: number; resourceSliceCount?: number };
  if (!pool.name) causes.push('spec.pool.name: Required value');
  const count = pool.resourceSliceCount ?? 0;
  if (!(count > 0)) causes.push(`spec.pool.resourceSliceCount: Invalid value: ${count}: must be greater than zero`);
  if ((pool.generation ?? 0) < 0)
    causes.push(`spec.pool.generation: Invalid value: ${pool.generation}: must be greater than or equal to zero`);
  const placement = ['nodeName', 'nodeSelector', 'allNodes', 'perDeviceNodeSelection'].filter(
    (k) => spec[k] !== undefined && spec[k] !== false && spec[k] !== '',
  );
  const rule = 'exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required';
  if (placement.length === 0) causes.push(`spec: Required value: ${rule}`);
  if (placement.length > 1)
    causes.push(
      `spec: Invalid value: "{${placement.map((k) => `\`${k}\``).join(', ')}}": ${rule}, but multiple fields are set`,
    );
  causes.push(...partitionCauses(spec));
  const devices = (spec['devices'] ?? []) as Json[];
  // A list over its limit is refused as a whole: kube-apiserver does not look at its items.
  if (devices.length > deviceLimit(devices)) return causes;
  const seen = new Set<string>();
  devices.forEach((d, i) => {
    const name = String(d['name'] ?? '');
    if (!LABEL.test(name)) causes.push(`spec.devices[${i}].name: Invalid value: "${name}": ${LABEL_RULE}`);
    else if (seen.has(name)) causes.push(`spec.devices[${i}]: Duplicate value: "${name}"`);
    seen.add(name);
    for (const [cap, c] of Object.entries((d['capacity'] ?? {}) as Record<string, Json>)) {
      if (c['requestPolicy'] && d['allowMultipleAllocations'] !== true)
        causes.push(
          `spec.devices[${i}].capacity[${cap}].requestPolicy: Forbidden: allowMultipleAllocations must be true`,
        );
    }
  });
  return causes;
}

/** Devices per slice: 128, or 64 where any device has taints or consumes counters. */
function deviceLimit(devices: readonly Json[]): number {
  return devices.some((d) => d['taints'] || d['consumesCounters']) ? 64 : 128;
}

const tooMany = (field: string, n: number, max: number) => `${field}: Too many: ${n}: must have at most ${max} items`;

/**
 * Partitionable devices (KEP-4815): a slice holds counter sets or devices, not both; at most 8 sets
 * of at most 32 counters; at most 64 devices where any consumes counters; at most 2 sets consumed
 * per device.
 */
function partitionCauses(spec: Json): string[] {
  const causes: string[] = [];
  const sets = spec['sharedCounters'] as Json[] | undefined;
  const devices = (spec['devices'] ?? []) as Json[];
  if (sets?.length && devices.length)
    causes.push('spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed');
  if (sets && sets.length > 8) causes.push(tooMany('spec.sharedCounters', sets.length, 8));
  else
    (sets ?? []).forEach((set, i) => {
      const n = Object.keys((set['counters'] ?? {}) as Json).length;
      if (n > 32) causes.push(tooMany(`spec.sharedCounters[${i}].counters`, n, 32));
    });
  if (devices.length > deviceLimit(devices)) causes.push(tooMany('spec.devices', devices.length, deviceLimit(devices)));
  else
    devices.forEach((d, i) => {
      const uses = (d['consumesCounters'] ?? []) as unknown[];
      if (uses.length > 2) causes.push(tooMany(`spec.devices[${i}].consumesCounters`, uses.length, 2));
    });
  return causes;
}

function classCauses(spec: Json | undefined): string[] {
  const causes: string[] = [];
  ((spec?.['selectors'] ?? []) as Json[]).forEach((s, i) => {
    const cel = s['cel'] as { expression?: string } | undefined;
    if (!cel) causes.push(`spec.selectors[${i}].cel: Required value`);
    else if (!cel.expression) causes.push(`spec.selectors[${i}].cel.expression: Required value`);
  });
  return causes;
}

/** The 422 kube-apiserver answers for an invalid DRA object (`sub`: the subresource written), or undefined. */
export function validateDraObject(
  resource: string,
  kind: string,
  obj: KubeObject,
  old: KubeObject | undefined,
  sub: string | undefined,
): ApiError | undefined {
  const spec = obj['spec'] as Json | undefined;
  let causes: string[] = [];
  if (resource === 'resourceclaims') {
    causes = sub === 'status' ? claimStatusCauses(obj, old) : claimSpecCauses(spec as ClaimSpecJson, 'spec');
    if (old && sub !== 'status' && JSON.stringify(old['spec']) !== JSON.stringify(spec))
      causes.push(`spec: Invalid value: ${JSON.stringify(spec)}: field is immutable`);
  } else if (resource === 'resourceclaimtemplates') {
    causes = claimSpecCauses((spec?.['spec'] ?? {}) as ClaimSpecJson, 'spec.spec');
  } else if (resource === 'resourceslices') causes = sliceCauses(spec ?? {});
  else if (resource === 'deviceclasses') causes = classCauses(spec);
  return causes.length ? invalid(kind, obj.metadata.name, causes) : undefined;
}
