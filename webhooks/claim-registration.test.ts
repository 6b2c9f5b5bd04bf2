import { readdirSync, readFileSync } from 'node:fs';
import { evaluate } from '@marcbachmann/cel-js';
import { describe, expect, it } from 'vitest';
import {
  buildClaimWebhookConfigurations,
  claimsVcudaExpression,
  ensureClaimWebhookRegistration,
} from './claim-registration.js';
import { parseClaimReview } from './claim-review.js';
import { registrationConfigSchema } from './config.js';
import type { StoredConfiguration, WebhookConfiguration, WebhookConfigurationClient } from './registration.js';
import { readClaimSpec } from './validate-claim.js';

const policy = { deviceClassName: 'gpu.vcuda.io', driverName: 'gpu.vcuda.io' };
const config = registrationConfigSchema.parse({ exemptNamespaces: ['kube-system', 'vcuda-system'] });
const dir = new URL('./testdata/kubernetes-1.36/', import.meta.url);
const reviews = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => [f, JSON.parse(readFileSync(new URL(f, dir), 'utf8')) as { request: { object: unknown } }] as const);

describe('claim webhook configurations', () => {
  const built = buildClaimWebhookConfigurations({ config, claims: policy, caBundlePem: 'PEM' });

  it('send every write that sets, keeps or clears an allocation, and deletions, to the ledger, in every namespace', () => {
    const charge = built.validating.webhooks.find((h) => h.name === 'charge.resourceclaims.vcuda.io');
    expect(charge?.clientConfig.service?.path).toBe('/admission/charge-claims');
    expect(charge?.rules).toEqual([
      {
        operations: ['UPDATE', 'DELETE'],
        apiGroups: ['resource.k8s.io'],
        apiVersions: ['v1'],
        resources: ['resourceclaims', 'resourceclaims/status'],
        scope: 'Namespaced',
      },
    ]);
    expect(charge?.failurePolicy).toBe('Fail');
    // An exempt namespace must not be a way around the quota.
    expect(charge?.namespaceSelector).toEqual({});
    expect(charge?.sideEffects).toBe('NoneOnDryRun');
    expect(charge?.matchConditions?.[0]?.expression).toContain("r.driver == 'gpu.vcuda.io'");
  });

  it('send CREATE of claims and templates to the claim hooks, failing closed, outside the exempt namespaces', () => {
    expect(built.mutating.metadata.name).toBe('vcuda-mutate-claims');
    expect(built.validating.metadata.name).toBe('vcuda-validate-claims');
    const hooks = [...built.mutating.webhooks, ...built.validating.webhooks].filter(
      (h) => !h.name.startsWith('charge.'),
    );
    expect(hooks.map((h) => [h.name, h.clientConfig.service?.path, h.rules[0]?.resources])).toEqual([
      ['mutate.resourceclaims.vcuda.io', '/admission/mutate-claims', ['resourceclaims']],
      ['mutate.resourceclaimtemplates.vcuda.io', '/admission/mutate-claims', ['resourceclaimtemplates']],
      ['validate.resourceclaims.vcuda.io', '/admission/validate-claims', ['resourceclaims']],
      ['validate.resourceclaimtemplates.vcuda.io', '/admission/validate-claims', ['resourceclaimtemplates']],
    ]);
    for (const h of hooks) {
      expect(h.rules).toEqual([
        {
          operations: ['CREATE'],
          apiGroups: ['resource.k8s.io'],
          apiVersions: ['v1'],
          resources: h.rules[0]?.resources,
          scope: 'Namespaced',
        },
      ]);
      expect(h.failurePolicy).toBe('Fail');
      expect(h.clientConfig.caBundle).toBe(Buffer.from('PEM').toString('base64'));
      expect(h.namespaceSelector.matchExpressions).toEqual([
        { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'vcuda-system'] },
      ]);
    }
  });

  it.each(reviews)('select %s exactly when the claim hooks would judge it', (_file, review) => {
    const parsed = parseClaimReview(review);
    if (!parsed.ok || !parsed.request.spec) throw new Error('fixture does not parse');
    const judged = readClaimSpec(parsed.request.spec, parsed.request.specPath, policy).kind !== 'not-vcuda';
    const spec = parsed.request.kind === 'ResourceClaim' ? 'object.spec' : 'object.spec.spec';
    expect(evaluate(claimsVcudaExpression(spec, policy), { object: review.request.object })).toBe(judged);
  });

  it.each([
    [
      'a firstAvailable alternative of the class',
      {
        requests: [
          {
            name: 'g',
            firstAvailable: [
              { name: 'a', deviceClassName: 'x' },
              { name: 'b', deviceClassName: 'gpu.vcuda.io' },
            ],
          },
        ],
      },
      true,
    ],
    [
      'only a config for the driver',
      {
        requests: [{ name: 'g', exactly: { deviceClassName: 'x' } }],
        config: [{ opaque: { driver: 'gpu.vcuda.io', parameters: {} } }],
      },
      true,
    ],
    [
      'a config for another driver',
      { requests: [{ name: 'g', exactly: { deviceClassName: 'x' } }], config: [{ opaque: { driver: 'x' } }] },
      false,
    ],
    ['no devices', undefined, false],
  ])('match a claim with %s: %s', (_name, devices, want) => {
    const object = { spec: devices ? { devices } : {} };
    expect(evaluate(claimsVcudaExpression('object.spec', policy), { object })).toBe(want);
    expect(evaluate(claimsVcudaExpression('object.spec.spec', policy), { object: { spec: object } })).toBe(want);
    expect(evaluate(claimsVcudaExpression('object.spec.spec', policy), { object: { spec: {} } })).toBe(false);
  });

  it('ensures both, leaving them alone when the API server has them', async () => {
    const stored = new Map<string, WebhookConfiguration>();
    const client: WebhookConfigurationClient = {
      serverVersion: async () => ({ major: '1', minor: '36' }),
      read: async (_kind, name) => stored.get(name) as StoredConfiguration | undefined,
      create: async (obj) => {
        stored.set(obj.metadata.name, { ...obj, metadata: { ...obj.metadata, resourceVersion: '1' } });
        return stored.get(obj.metadata.name) as StoredConfiguration;
      },
      replace: async (obj) => {
        stored.set(obj.metadata.name, obj);
        return obj as StoredConfiguration;
      },
    };
    const input = { config, claims: policy, caBundlePem: 'PEM' };
    expect(await ensureClaimWebhookRegistration(client, input)).toEqual({ mutating: 'created', validating: 'created' });
    expect(await ensureClaimWebhookRegistration(client, input)).toEqual({
      mutating: 'unchanged',
      validating: 'unchanged',
    });
    expect(await ensureClaimWebhookRegistration(client, { ...input, caBundlePem: 'NEW' })).toEqual({
      mutating: 'updated',
      validating: 'updated',
    });
  });
});
