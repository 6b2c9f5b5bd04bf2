/**
 * AdmissionReview v1 for ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1), as a
 * 1.36 kube-apiserver sends them (testdata/kubernetes-1.36/). Strict about the envelope and the
 * parts of the claim vcuda reads, loose about everything else, as for pods (admission-review.ts).
 * The webhooks are registered for v1 with `matchPolicy: Equivalent`, so a claim written through
 * another served version arrives converted to v1.
 */
import { z } from 'zod';
import { type FieldError, fieldErrorsFromZod } from '../contract/index.js';
import { type ReviewText, readReviewText } from './admission-review.js';
import type { ClaimSpecLike } from './validate-claim.js';

const quantityMap = z.record(z.string(), z.union([z.string(), z.number()])).nullish();

const exactRequest = {
  deviceClassName: z.string().optional(),
  allocationMode: z.string().optional(),
  count: z.number().int().optional(),
  capacity: z.looseObject({ requests: quantityMap }).nullish(),
};

const deviceRequestSchema = z.looseObject({
  name: z.string().optional(),
  exactly: z.looseObject(exactRequest).nullish(),
  firstAvailable: z.array(z.looseObject({ name: z.string().optional(), ...exactRequest })).nullish(),
});

const deviceConfigSchema = z.looseObject({
  requests: z.array(z.string()).nullish(),
  opaque: z.looseObject({ driver: z.string().optional(), parameters: z.unknown() }).nullish(),
});

const claimSpecSchema = z.looseObject({
  devices: z
    .looseObject({ requests: z.array(deviceRequestSchema).nullish(), config: z.array(deviceConfigSchema).nullish() })
    .nullish(),
});

const metadataSchema = z.looseObject({
  name: z.string().optional(),
  generateName: z.string().optional(),
  namespace: z.string().optional(),
});

const claimSchema = z.looseObject({ metadata: metadataSchema.nullish(), spec: claimSpecSchema.nullish() });
const templateSchema = z.looseObject({
  metadata: metadataSchema.nullish(),
  spec: z.looseObject({ spec: claimSpecSchema.nullish() }).nullish(),
});

export type ClaimKind = 'ResourceClaim' | 'ResourceClaimTemplate';
const CLAIM_KINDS: readonly string[] = ['ResourceClaim', 'ResourceClaimTemplate'] satisfies ClaimKind[];

const requestSchema = z.looseObject({
  uid: z.string().min(1, 'must be a non-empty string'),
  kind: z
    .object({ group: z.string(), version: z.string(), kind: z.string() })
    .refine((k) => k.group === 'resource.k8s.io' && k.version === 'v1' && CLAIM_KINDS.includes(k.kind), {
      message: 'this webhook admits resource.k8s.io/v1 ResourceClaims and ResourceClaimTemplates only',
    }),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  name: z.string().optional(),
  namespace: z.string().optional(),
  userInfo: z.looseObject({ username: z.string().optional() }).nullish(),
  // Read with the schema of its kind once the kind is known (a template is a loose claim too).
  object: z.looseObject({}).nullish(),
  dryRun: z.boolean().nullish(),
});

const reviewSchema = z.looseObject({
  apiVersion: z.literal('admission.k8s.io/v1', { message: 'must be "admission.k8s.io/v1"' }),
  kind: z.literal('AdmissionReview', { message: 'must be "AdmissionReview"' }),
  request: requestSchema,
});

/** The parts of a claim review vcuda reads. */
export type ClaimAdmissionRequest = {
  uid: string;
  kind: ClaimKind;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  namespace: string;
  /** `team-a/share-30`, or `team-a/trainer-gpu-*` for a claim the controller names on create. */
  label: string;
  dryRun: boolean;
  /** The claim's spec (a template's `spec.spec`); undefined without an object. */
  spec: ClaimSpecLike | undefined;
  /** Where `spec` is in the object: `spec`, or `spec.spec` for a template. */
  specPath: 'spec' | 'spec.spec';
};

type Envelope = z.infer<typeof requestSchema>;
type ClaimObject = z.infer<typeof claimSchema> & z.infer<typeof templateSchema>;

function labelOf(r: Envelope, object: ClaimObject | undefined): string {
  const meta = object?.metadata;
  const namespace = r.namespace ?? meta?.namespace ?? '';
  const name = meta?.name || r.name || (meta?.generateName ? `${meta.generateName}*` : '');
  return `${namespace}/${name}`;
}

function toRequest(r: Envelope, object: ClaimObject | undefined): ClaimAdmissionRequest {
  const kind = r.kind.kind as ClaimKind;
  const isTemplate = kind === 'ResourceClaimTemplate';
  const spec = isTemplate ? object?.spec?.spec : object?.spec;
  return {
    uid: r.uid,
    kind,
    operation: r.operation,
    namespace: r.namespace ?? object?.metadata?.namespace ?? '',
    label: `${isTemplate ? 'resourceclaimtemplate' : 'resourceclaim'} ${labelOf(r, object)}`,
    dryRun: r.dryRun === true,
    spec: object ? ((spec ?? {}) as ClaimSpecLike) : undefined,
    specPath: isTemplate ? 'spec.spec' : 'spec',
  };
}

export type ParsedClaimReview = { ok: true; request: ClaimAdmissionRequest } | { ok: false; errors: FieldError[] };

/** Checks an already JSON-parsed body; every problem is listed, each naming its field. */
export function parseClaimReview(body: unknown): ParsedClaimReview {
  const parsed = reviewSchema.safeParse(body);
  if (!parsed.success) return { ok: false, errors: fieldErrorsFromZod(parsed.error.issues) };
  const { request } = parsed.data;
  if (request.operation === 'CREATE' && !request.object) {
    const message = 'request.object: required for CREATE';
    return { ok: false, errors: [{ path: 'request.object', rule: 'required', message }] };
  }
  if (!request.object) return { ok: true, request: toRequest(request, undefined) };
  const schema = request.kind.kind === 'ResourceClaimTemplate' ? templateSchema : claimSchema;
  const object = schema.safeParse(request.object);
  if (!object.success) return { ok: false, errors: fieldErrorsFromZod(object.error.issues, 'request.object') };
  return { ok: true, request: toRequest(request, object.data as ClaimObject) };
}

/** The body text as a claim review, or the message of a 400 naming what is wrong. */
export function parseClaimReviewText(text: string): ReviewText<ClaimAdmissionRequest> {
  return readReviewText(text, parseClaimReview);
}
