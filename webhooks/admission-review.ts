/**
 * AdmissionReview v1 in and out (PROTOCOLS.md §4). Parsing is strict about the envelope and the
 * parts of the pod vcuda reads, and loose about everything else, so the API server's real
 * payloads (defaulted fields, managedFields, status) pass unchanged.
 */
import { z } from 'zod';
import { type FieldError, fieldErrorsFromZod, formatFieldErrors, type PodLike } from '../contract/index.js';
import { isWellFormedReview } from './admission-shape.js';
import type { JsonPatchOp } from './json-patch.js';

const quantityMap = z.record(z.string(), z.union([z.string(), z.number()])).nullish();

const containerSchema = z.looseObject({
  name: z.string().min(1),
  resources: z.looseObject({ limits: quantityMap, requests: quantityMap }).nullish(),
});

export const podSchema = z.looseObject({
  apiVersion: z.literal('v1').optional(),
  kind: z.literal('Pod').optional(),
  metadata: z.looseObject({
    name: z.string().optional(),
    generateName: z.string().optional(),
    namespace: z.string().optional(),
    uid: z.string().optional(),
    annotations: z.record(z.string(), z.string()).nullish(),
    labels: z.record(z.string(), z.string()).nullish(),
  }),
  spec: z.looseObject({
    containers: z.array(containerSchema).min(1),
    initContainers: z.array(containerSchema).nullish(),
    nodeName: z.string().optional(),
    schedulerName: z.string().optional(),
  }),
});

export type AdmissionPod = z.infer<typeof podSchema> & PodLike;

const groupVersionKind = z.object({ group: z.string(), version: z.string(), kind: z.string() });

const requestSchema = z.looseObject({
  uid: z.string().min(1, 'must be a non-empty string'),
  kind: groupVersionKind.refine((k) => k.group === '' && k.version === 'v1' && k.kind === 'Pod', {
    message: 'this webhook admits core/v1 Pods only',
  }),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  name: z.string().optional(),
  namespace: z.string().optional(),
  subResource: z.string().optional(),
  userInfo: z
    .looseObject({
      username: z.string().optional(),
      uid: z.string().optional(),
      groups: z.array(z.string()).nullish(),
    })
    .nullish(),
  object: podSchema.nullish(),
  oldObject: podSchema.nullish(),
  dryRun: z.boolean().nullish(),
});

export const reviewSchema = z.looseObject({
  apiVersion: z.literal('admission.k8s.io/v1', { message: 'must be "admission.k8s.io/v1"' }),
  kind: z.literal('AdmissionReview', { message: 'must be "AdmissionReview"' }),
  request: requestSchema,
});

export type AdmissionRequest = z.infer<typeof requestSchema> & {
  object?: AdmissionPod | null;
  oldObject?: AdmissionPod | null;
};

export type ParsedReview = { ok: true; request: AdmissionRequest } | { ok: false; errors: FieldError[] };

/** Checks an already JSON-parsed body; every problem is listed, each naming its field. */
export function parseAdmissionReview(body: unknown): ParsedReview {
  let request: AdmissionRequest;
  // The API server's reviews take the fast check and are used as parsed; zod names what is wrong.
  if (isWellFormedReview(body)) request = (body as { request: AdmissionRequest }).request;
  else {
    const parsed = reviewSchema.safeParse(body);
    if (!parsed.success) return { ok: false, errors: fieldErrorsFromZod(parsed.error.issues) };
    request = parsed.data.request as AdmissionRequest;
  }
  const needsObject = request.operation === 'CREATE' || request.operation === 'UPDATE';
  if (needsObject && !request.object) {
    return {
      ok: false,
      errors: [
        { path: 'request.object', rule: 'required', message: `request.object: required for ${request.operation}` },
      ],
    };
  }
  if (request.operation === 'UPDATE' && !request.oldObject) {
    return {
      ok: false,
      errors: [{ path: 'request.oldObject', rule: 'required', message: 'request.oldObject: required for UPDATE' }],
    };
  }
  return { ok: true, request };
}

/** A review's body text, read: the request, or the message of a 400 naming what is wrong. */
export type ReviewText<T> = { ok: true; request: T } | { ok: false; message: string };

/** JSON-parses a hook's body text and checks it with `parse` (pods' or claims' reviews). */
export function readReviewText<T>(
  text: string,
  parse: (body: unknown) => { ok: true; request: T } | { ok: false; errors: FieldError[] },
): ReviewText<T> {
  if (text.trim() === '') return { ok: false, message: 'request body is empty; expected an AdmissionReview (JSON)' };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { ok: false, message: `request body is not JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  const parsed = parse(body);
  if (!parsed.ok)
    return { ok: false, message: `not an admission.k8s.io/v1 AdmissionReview:\n${formatFieldErrors(parsed.errors)}` };
  return { ok: true, request: parsed.request };
}

export type AdmissionResponse = {
  uid: string;
  allowed: boolean;
  status?: { code: number; reason?: string; message: string };
  patchType?: 'JSONPatch';
  patch?: string;
  warnings?: string[];
};

export type AdmissionReviewOut = {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: AdmissionResponse;
};

// The API server may truncate longer warnings; keep each short and the list bounded.
const WARNING_MAX_CHARS = 120;
const WARNINGS_MAX = 16;

function trimWarnings(warnings: readonly string[]): string[] | undefined {
  if (warnings.length === 0) return undefined;
  return warnings
    .slice(0, WARNINGS_MAX)
    .map((w) => (w.length > WARNING_MAX_CHARS ? `${w.slice(0, WARNING_MAX_CHARS - 3)}...` : w));
}

export function allowResponse(uid: string, patch: readonly JsonPatchOp[] = [], warnings: readonly string[] = []) {
  const response: AdmissionResponse = { uid, allowed: true };
  if (patch.length > 0) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(patch)).toString('base64');
  }
  const w = trimWarnings(warnings);
  if (w) response.warnings = w;
  return review(response);
}

/** A refusal: 422 for a pod that breaks the rules, 403 for one that exceeds its quota or forges. */
export function denyResponse(
  uid: string,
  message: string,
  opts: { code?: number; reason?: string; warnings?: readonly string[] } = {},
): AdmissionReviewOut {
  const response: AdmissionResponse = {
    uid,
    allowed: false,
    status: { code: opts.code ?? 422, reason: opts.reason ?? 'Invalid', message },
  };
  const w = trimWarnings(opts.warnings ?? []);
  if (w) response.warnings = w;
  return review(response);
}

function review(response: AdmissionResponse): AdmissionReviewOut {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

/** The message a refused pod's owner reads: what was refused, then one line per violation. */
export function refusalMessage(what: string, errors: readonly FieldError[]): string {
  const n = errors.length;
  return `vcuda refused ${what}: ${n} problem${n === 1 ? '' : 's'}:\n${formatFieldErrors(errors)}`;
}
