/**
 * The claim hooks' Mutating- and ValidatingWebhookConfiguration (`<name>-mutate-claims`,
 * `<name>-validate-claims`), kept by the control plane beside the pods' ones when
 * `webhook.claims.register` is on (the DRA overlay turns it on), so their caBundle follows the
 * serving certificate as the pods' does. Building them is pure.
 *
 * Scoping: a CEL match condition selects the ResourceClaims and templates that name vcuda's
 * DeviceClass or carry an opaque config for its driver, so every other claim never depends on
 * vcuda being up; those are `Fail`. Only CREATE is sent (claim specs are immutable, see
 * claim-admission.ts). resource.k8s.io/v1 needs 1.34 or later, long after match conditions (1.28),
 * so there is no selector fallback.
 * The validating configuration also holds the ledger's charge hook on allocations (`chargeHook`).
 */
import type { RegistrationConfig } from './config.js';
import {
  clientConfig,
  type EnsureAction,
  ensureOne,
  exemptExpressions,
  MANAGED_BY,
  type Webhook,
  type WebhookConfiguration,
  type WebhookConfigurationClient,
} from './registration.js';
import type { ClaimPolicy } from './validate-claim.js';

/** A CEL string literal. */
function celString(s: string): string {
  return `'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/**
 * CEL: does the claim spec at `spec` (`object.spec`, or a template's `object.spec.spec`) name the
 * class in a request or an alternative, or carry an opaque config for the driver? The same test as
 * validate-claim.ts's `not-vcuda`.
 */
export function claimsVcudaExpression(spec: 'object.spec' | 'object.spec.spec', policy: ClaimPolicy): string {
  const cls = celString(policy.deviceClassName);
  const driver = celString(policy.driverName);
  const devices = `${spec}.devices`;
  const request = `(has(r.exactly) && r.exactly.deviceClassName == ${cls}) || (has(r.firstAvailable) && r.firstAvailable.exists(s, s.deviceClassName == ${cls}))`;
  const requests = `(has(${devices}.requests) && ${devices}.requests.exists(r, ${request}))`;
  const config = `(has(${devices}.config) && ${devices}.config.exists(c, has(c.opaque) && c.opaque.driver == ${driver}))`;
  const guard = spec === 'object.spec.spec' ? `has(object.spec.spec) && has(${devices})` : `has(${devices})`;
  return `${guard} && (${requests} || ${config})`;
}

export type ClaimRegistrationInput = {
  config: RegistrationConfig;
  claims: ClaimPolicy;
  caBundlePem: string;
};

function claimHook(
  input: ClaimRegistrationInput,
  hook: 'mutate' | 'validate',
  resource: 'resourceclaims' | 'resourceclaimtemplates',
): Webhook {
  const spec = resource === 'resourceclaims' ? 'object.spec' : 'object.spec.spec';
  return {
    name: `${hook}.${resource}.vcuda.io`,
    clientConfig: clientConfig(input.config, `/admission/${hook}-claims`, input.caBundlePem),
    rules: [
      {
        operations: ['CREATE'],
        apiGroups: ['resource.k8s.io'],
        apiVersions: ['v1'],
        resources: [resource],
        scope: 'Namespaced',
      },
    ],
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    namespaceSelector: { matchExpressions: exemptExpressions(input.config) },
    objectSelector: {},
    sideEffects: 'None',
    timeoutSeconds: input.config.timeoutSeconds,
    admissionReviewVersions: ['v1'],
    matchConditions: [{ name: 'asks-vcuda', expression: claimsVcudaExpression(spec, input.claims) }],
    ...(hook === 'mutate' ? { reinvocationPolicy: 'Never' as const } : {}),
  };
}

/** CEL: does `o` (`object` or `oldObject`) hold an allocation with a result of the driver? */
function allocatedBy(o: 'object' | 'oldObject', driver: string): string {
  const devices = `${o}.status.allocation.devices`;
  return `(${o} != null && has(${o}.status) && has(${o}.status.allocation) && has(${devices}) && has(${devices}.results) && ${devices}.results.exists(r, r.driver == ${celString(driver)}))`;
}

/**
 * The ledger's hook (control-plane/claim-ledger/): every write that sets, keeps or clears an
 * allocation of the driver, and the deletion of an allocated claim. `Fail`: an allocation the
 * ledger did not charge is never stored, and a release waits for the ledger to be back.
 */
function chargeHook(input: ClaimRegistrationInput): Webhook {
  return {
    name: 'charge.resourceclaims.vcuda.io',
    clientConfig: clientConfig(input.config, '/admission/charge-claims', input.caBundlePem),
    rules: [
      {
        operations: ['UPDATE', 'DELETE'],
        apiGroups: ['resource.k8s.io'],
        apiVersions: ['v1'],
        resources: ['resourceclaims', 'resourceclaims/status'],
        scope: 'Namespaced',
      },
    ],
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    namespaceSelector: {},
    objectSelector: {},
    sideEffects: 'NoneOnDryRun',
    timeoutSeconds: input.config.timeoutSeconds,
    admissionReviewVersions: ['v1'],
    matchConditions: [
      {
        name: 'allocated-by-vcuda',
        expression: `${allocatedBy('object', input.claims.driverName)} || ${allocatedBy('oldObject', input.claims.driverName)}`,
      },
    ],
  };
}

/** Both claim configurations, complete (every defaultable field set, so comparing is exact). */
export function buildClaimWebhookConfigurations(input: ClaimRegistrationInput): {
  mutating: WebhookConfiguration;
  validating: WebhookConfiguration;
} {
  const metadata = (suffix: string) => ({ name: `${input.config.name}-${suffix}`, labels: { ...MANAGED_BY } });
  const hooks = (hook: 'mutate' | 'validate') => [
    claimHook(input, hook, 'resourceclaims'),
    claimHook(input, hook, 'resourceclaimtemplates'),
  ];
  return {
    mutating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: metadata('mutate-claims'),
      webhooks: hooks('mutate'),
    },
    validating: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: metadata('validate-claims'),
      webhooks: [...hooks('validate'), chargeHook(input)],
    },
  };
}

/** Creates or updates both claim configurations; call it after the pods' ones, with the same bundle. */
export async function ensureClaimWebhookRegistration(
  client: WebhookConfigurationClient,
  input: ClaimRegistrationInput,
): Promise<{ mutating: EnsureAction; validating: EnsureAction }> {
  const built = buildClaimWebhookConfigurations(input);
  const mutating = await ensureOne(client, built.mutating);
  const validating = await ensureOne(client, built.validating);
  return { mutating: mutating.action, validating: validating.action };
}
