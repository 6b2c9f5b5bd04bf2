/**
 * A fast yes/no check that a JSON-parsed body has exactly the shape the zod schema in
 * admission-review.ts accepts, for the fields vcuda reads. Every review the API server sends
 * passes it, and then the body is used as it is, without zod building a copy of the envelope,
 * the pod, its metadata, spec and every container. Anything it does not accept goes through zod,
 * which names each bad field; so it may be stricter than zod, never looser
 * (admission-shape.test.ts checks that on the malformed cases and on random edits).
 */

type Json = Record<string, unknown>;

const OPERATIONS: ReadonlySet<unknown> = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isOptionalString(value: unknown): boolean {
  return value === undefined || typeof value === 'string';
}

function isNullish(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

function isStringMap(value: unknown): boolean {
  if (isNullish(value)) return true;
  if (!isObject(value)) return false;
  for (const key in value) if (typeof value[key] !== 'string') return false;
  return true;
}

function isQuantityMap(value: unknown): boolean {
  if (isNullish(value)) return true;
  if (!isObject(value)) return false;
  for (const key in value) {
    const q = value[key];
    if (typeof q !== 'string' && !(typeof q === 'number' && Number.isFinite(q))) return false;
  }
  return true;
}

function isContainer(value: unknown): boolean {
  if (!isObject(value) || typeof value.name !== 'string' || value.name.length === 0) return false;
  const resources = value.resources;
  if (isNullish(resources)) return true;
  return isObject(resources) && isQuantityMap(resources.limits) && isQuantityMap(resources.requests);
}

function isContainerList(value: unknown): boolean {
  if (!Array.isArray(value)) return false;
  for (const c of value) if (!isContainer(c)) return false;
  return true;
}

function isPod(value: unknown): boolean {
  if (!isObject(value)) return false;
  if (value.apiVersion !== undefined && value.apiVersion !== 'v1') return false;
  if (value.kind !== undefined && value.kind !== 'Pod') return false;
  const { metadata, spec } = value;
  if (!isObject(metadata) || !isObject(spec)) return false;
  if (
    !isOptionalString(metadata.name) ||
    !isOptionalString(metadata.generateName) ||
    !isOptionalString(metadata.namespace) ||
    !isOptionalString(metadata.uid) ||
    !isStringMap(metadata.annotations) ||
    !isStringMap(metadata.labels)
  )
    return false;
  if (!isContainerList(spec.containers) || (spec.containers as unknown[]).length === 0) return false;
  if (!isNullish(spec.initContainers) && !isContainerList(spec.initContainers)) return false;
  return isOptionalString(spec.nodeName) && isOptionalString(spec.schedulerName);
}

function isUserInfo(value: unknown): boolean {
  if (isNullish(value)) return true;
  if (!isObject(value) || !isOptionalString(value.username) || !isOptionalString(value.uid)) return false;
  const groups = value.groups;
  if (isNullish(groups)) return true;
  if (!Array.isArray(groups)) return false;
  for (const g of groups) if (typeof g !== 'string') return false;
  return true;
}

/** True only for a body the full schema accepts as it stands (envelope, request, both pods). */
export function isWellFormedReview(body: unknown): boolean {
  if (!isObject(body) || body.apiVersion !== 'admission.k8s.io/v1' || body.kind !== 'AdmissionReview') return false;
  const request = body.request;
  if (!isObject(request)) return false;
  const kind = request.kind;
  if (!isObject(kind) || kind.group !== '' || kind.version !== 'v1' || kind.kind !== 'Pod') return false;
  if (typeof request.uid !== 'string' || request.uid.length === 0 || !OPERATIONS.has(request.operation)) return false;
  if (!isOptionalString(request.name) || !isOptionalString(request.namespace) || !isOptionalString(request.subResource))
    return false;
  if (!isNullish(request.dryRun) && typeof request.dryRun !== 'boolean') return false;
  if (!isUserInfo(request.userInfo)) return false;
  return (
    (isNullish(request.object) || isPod(request.object)) && (isNullish(request.oldObject) || isPod(request.oldObject))
  );
}
