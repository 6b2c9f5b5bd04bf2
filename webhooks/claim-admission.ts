/**
 * What the claim hooks decide for one review, pure: allowed as it is, refused with one message
 * naming every bad field (validate-claim.ts), or allowed once the namespace's quota has room
 * (the mutating hook, for a ResourceClaim: a template holds nothing, the claims made from it
 * come through here when the controller creates them). Only CREATE is judged: a claim's spec is
 * immutable, and the scheduler's, the controller's and the driver's later writes (finalizers,
 * status) must never depend on a claim having passed rules it was created without.
 */
import { refusalMessage } from './admission-review.js';
import type { ClaimAdmissionRequest } from './claim-review.js';
import { measureClaimQuotaUsage, type PodQuotaUsage } from './quota-precheck.js';
import { type ClaimPolicy, readClaimSpec } from './validate-claim.js';

export type ClaimVerdict =
  | { kind: 'allow' }
  | { kind: 'refuse'; message: string; rules: string[] }
  | { kind: 'precheck'; usage: PodQuotaUsage };

export function judgeClaimReview(
  request: ClaimAdmissionRequest,
  policy: ClaimPolicy,
  hook: 'mutate' | 'validate',
): ClaimVerdict {
  if (request.operation !== 'CREATE' || !request.spec) return { kind: 'allow' };
  const reading = readClaimSpec(request.spec, request.specPath, policy);
  if (reading.kind === 'not-vcuda') return { kind: 'allow' };
  if (reading.kind === 'refused') {
    const rules = reading.errors.map((e) => e.rule);
    return { kind: 'refuse', message: refusalMessage(request.label, reading.errors), rules };
  }
  if (hook !== 'mutate' || request.kind !== 'ResourceClaim') return { kind: 'allow' };
  const usage = measureClaimQuotaUsage(reading.requests, reading.alternativesOutsideClass);
  return usage.core > 0 || usage.memoryMiB > 0 ? { kind: 'precheck', usage } : { kind: 'allow' };
}
