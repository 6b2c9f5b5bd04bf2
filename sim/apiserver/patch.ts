/**
 * The three patch types kube-apiserver accepts on PATCH: JSON patch (RFC 6902), merge patch
 * (RFC 7386) and strategic merge patch, the last as far as vcuda and kubectl need it: lists with
 * a merge key (containers, conditions, env, ...) merge element by element, `$patch: delete`
 * removes an element, other `$` directives are dropped.
 */
import jsonPatch from 'fast-json-patch';
import { type ApiError, badRequest, unsupportedMediaType } from './api-status.js';

export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

export function patchTypeOf(contentType: string | undefined): PatchType {
  const ct = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (ct === 'application/json-patch+json') return 'json';
  if (ct === 'application/merge-patch+json') return 'merge';
  if (ct === 'application/strategic-merge-patch+json') return 'strategic';
  if (ct === 'application/apply-patch+yaml') return 'apply';
  throw unsupportedMediaType(ct || '(none)');
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isObject(v: unknown): v is Record<string, Json> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out;
}

/** Merge keys of the list fields kubectl and vcuda patch, by field name (as in the Go struct tags). */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  env: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  ports: 'containerPort',
  conditions: 'type',
  ownerReferences: 'uid',
  imagePullSecrets: 'name',
  containerStatuses: 'name',
  initContainerStatuses: 'name',
  addresses: 'type',
};

function mergeList(key: string, target: unknown, patch: Json[]): unknown {
  const mergeKey = MERGE_KEYS[key];
  if (!mergeKey || !Array.isArray(target)) return patch.map((p) => (isObject(p) ? stripDirectives(p) : p));
  // A new list: its elements are replaced, never changed in place, so unchanged ones are shared.
  const out = [...target] as unknown[];
  for (const item of patch) {
    if (!isObject(item)) continue;
    const id = item[mergeKey];
    const at = out.findIndex((x) => isObject(x) && x[mergeKey] === id);
    if (item['$patch'] === 'delete') {
      if (at >= 0) out.splice(at, 1);
    } else if (at >= 0) out[at] = applyStrategicMergePatch(out[at], item);
    else out.push(stripDirectives(item));
  }
  return out;
}

function stripDirectives(v: Record<string, Json>): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const [k, x] of Object.entries(v)) if (!k.startsWith('$')) out[k] = isObject(x) ? stripDirectives(x) : x;
  return out;
}

export function applyStrategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return structuredClone(patch);
  if (patch['$patch'] === 'replace') return stripDirectives(patch);
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$')) continue;
    if (v === null) delete out[k];
    else if (Array.isArray(v)) out[k] = mergeList(k, out[k], v);
    else out[k] = applyStrategicMergePatch(out[k], v);
  }
  return out;
}

export function applyJsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw badRequest('json patch must be an array of operations');
  // One copy, validated operation by operation as it is patched (what `validate` would try on a copy of its own).
  try {
    return jsonPatch.applyPatch(structuredClone(target), ops as jsonPatch.Operation[], true, true).newDocument;
  } catch (e) {
    if (e instanceof jsonPatch.JsonPatchError) throw patchFailure(e.message);
    throw e;
  }
}

function patchFailure(message: string): ApiError {
  const e = badRequest(`the server rejected our request due to an error in our request: ${message.split('\n')[0]}`);
  e.status.code = 422;
  e.status.reason = 'Invalid';
  return e;
}

export function applyPatch(type: PatchType, target: unknown, patch: unknown): unknown {
  if (type === 'json') return applyJsonPatch(target, patch);
  if (type === 'merge') return applyMergePatch(target, patch);
  if (type === 'strategic') return applyStrategicMergePatch(target, patch);
  // Server-side apply approximated by a strategic merge: enough for `kubectl apply --server-side` demos.
  return applyStrategicMergePatch(target, patch);
}
