/**
 * `POST /admission/charge-claims`: the validating webhook on `resourceclaims` and
 * `resourceclaims/status` (UPDATE, DELETE) that keeps the ledger equal to the claims' allocations.
 * kube-scheduler writes an allocation and `reservedFor` in one status UPDATE in its PreBind; this
 * hook charges the allocation's shares before the write is stored, and refuses the write when the
 * ledger refuses them (quota, a card another cluster or replica took), so kube-scheduler's PreBind
 * fails and retries as on any bind conflict. Clearing an allocation or deleting the claim releases
 * it. A write that charges is refused when the ledger does not answer in time: no allocation is
 * ever stored that the ledger did not accept.
 */
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { Counter, type Registry } from 'prom-client';
import { z } from 'zod';
import { type DraClaim, draClaimSchema, fieldErrorsFromZod, messageOf, VcudaError } from '../../contract/index.js';
import { withDeadline } from '../../db/deadline.js';
import { allowResponse, denyResponse, readReviewText } from '../../webhooks/admission-review.js';
import { decideClaimCharge } from './claim-charge.js';
import type { ClaimLedger } from './claim-ledger.js';

const requestSchema = z.looseObject({
  uid: z.string().min(1).max(128),
  kind: z.object({ group: z.literal('resource.k8s.io'), version: z.literal('v1'), kind: z.literal('ResourceClaim') }),
  operation: z.enum(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']),
  object: draClaimSchema.nullish(),
  oldObject: draClaimSchema.nullish(),
  dryRun: z.boolean().nullish(),
});
const reviewSchema = z.looseObject({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: requestSchema,
});
type ChargeReview = z.infer<typeof requestSchema>;

function parseReview(body: unknown) {
  const parsed = reviewSchema.safeParse(body);
  return parsed.success
    ? { ok: true as const, request: parsed.data.request }
    : { ok: false as const, errors: fieldErrorsFromZod(parsed.error.issues) };
}

export type ClaimChargeRouteDeps = {
  claims: ClaimLedger;
  driver: string;
  maxBodyBytes: number;
  /** The ledger's deadline for one charge; past it the write is refused (the scheduler retries). */
  timeoutMs: number;
  /** Whether the request came from the API server; nobody else's review touches the ledger. */
  authenticate: (c: Context) => boolean;
  logger: { warn(obj: object, msg: string): void };
  /** Counts what the hook did with each write that touches the ledger; absent: not counted. */
  metrics?: ClaimChargeMetrics;
};

export type ClaimChargeResult = 'charged' | 'refused' | 'released' | 'error';
export type ClaimChargeMetrics = { charges: Counter<'result'> };

/**
 * `vcuda_claim_charges_total{result}`: allocations charged, refused by the ledger (quota, a card
 * taken), released, and writes the ledger did not answer in time or at all (`error`; a release
 * that failed counts here too, let through for the reconcile to repeat).
 */
export function createClaimChargeMetrics(registry: Registry): ClaimChargeMetrics {
  return {
    charges: new Counter({
      name: 'vcuda_claim_charges_total',
      help: 'DRA claim allocations the ledger charged, refused or released at the status write, and ledger errors',
      labelNames: ['result'],
      registers: [registry],
    }),
  };
}

/** The ledger said no (quota, a card taken, an allocation it cannot read), not "no answer". */
function isLedgerRefusal(err: unknown): boolean {
  return err instanceof VcudaError && err.code !== 'unavailable' && err.code !== 'internal';
}

async function answer(deps: ClaimChargeRouteDeps, request: ChargeReview, authenticated: boolean) {
  const before = (request.oldObject ?? undefined) as DraClaim | undefined;
  const after = request.operation === 'DELETE' ? undefined : ((request.object ?? undefined) as DraClaim | undefined);
  const decision = decideClaimCharge(before, after, deps.driver);
  if (decision.kind === 'none' || request.dryRun) return allowResponse(request.uid);
  if (!authenticated) {
    return denyResponse(request.uid, 'the ledger of claims answers the API server only', {
      code: 401,
      reason: 'Unauthorized',
    });
  }
  const count = (result: ClaimChargeResult) => deps.metrics?.charges.inc({ result });
  try {
    await withDeadline(deps.claims.apply(decision), deps.timeoutMs, 'claim charge');
    count(decision.kind === 'release' ? 'released' : 'charged');
    return allowResponse(request.uid);
  } catch (err) {
    // A release that failed leaves the ledger counting too much, never too little: let it through.
    if (decision.kind === 'release') {
      count('error');
      deps.logger.warn({ err, claimUid: decision.claimUid }, 'claim release failed; the reconcile will repeat it');
      return allowResponse(request.uid);
    }
    count(isLedgerRefusal(err) ? 'refused' : 'error');
    return denyResponse(request.uid, messageOf(err), { code: 403, reason: 'Forbidden' });
  }
}

export function claimChargeRoute(deps: ClaimChargeRouteDeps): Hono {
  const app = new Hono();
  const tooLarge = (c: Context) =>
    c.json({ error: { code: 'invalid', message: `request body exceeds ${deps.maxBodyBytes} bytes` } }, 400);
  app.post('/', bodyLimit({ maxSize: deps.maxBodyBytes, onError: tooLarge }), async (c) => {
    const parsed = readReviewText(await c.req.text(), parseReview);
    if (!parsed.ok) return c.json({ error: { code: 'invalid', message: parsed.message } }, 400);
    return c.json(await answer(deps, parsed.request, deps.authenticate(c)));
  });
  return app;
}
