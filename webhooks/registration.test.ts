import { readFileSync } from 'node:fs';
import { evaluate } from '@marcbachmann/cel-js';
import {
  MutatingWebhookConfiguration,
  ValidatingWebhookConfiguration,
} from 'kubernetes-models/admissionregistration.k8s.io/v1';
import { describe, expect, it } from 'vitest';
import { resourceNames, VcudaError } from '../contract/index.js';
import { registrationConfigSchema } from './config.js';
import {
  buildWebhookConfigurations,
  chooseScoping,
  ensureWebhookRegistration,
  isSubsetOf,
  parseServerVersion,
  requestsVcudaExpression,
  type StoredConfiguration,
  type WebhookConfiguration,
  type WebhookConfigurationClient,
} from './registration.js';

const names = resourceNames();
const config = registrationConfigSchema.parse({});
const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

// What the 1.26 API server accepts in admissionregistration.k8s.io/v1 webhooks (no matchConditions yet).
const FIELDS_1_26 = new Set([
  'name',
  'clientConfig',
  'rules',
  'failurePolicy',
  'matchPolicy',
  'namespaceSelector',
  'objectSelector',
  'sideEffects',
  'timeoutSeconds',
  'admissionReviewVersions',
  'reinvocationPolicy',
]);

/** The API server's own validation rules for webhook configurations (v1), as a list of problems. */
function problemsOf(obj: WebhookConfiguration, fields?: Set<string>): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [i, w] of obj.webhooks.entries()) {
    const at = `webhooks[${i}]`;
    for (const key of Object.keys(w)) if (fields && !fields.has(key)) problems.push(`${at}.${key} unknown`);
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?){2,}$/.test(w.name))
      problems.push(`${at}.name`);
    if (seen.has(w.name)) problems.push(`${at}.name duplicate`);
    seen.add(w.name);
    const cc = w.clientConfig;
    if (Boolean(cc.url) === Boolean(cc.service)) problems.push(`${at}.clientConfig: exactly one of url/service`);
    if (cc.url) {
      const u = new URL(cc.url);
      if (u.protocol !== 'https:' || u.search || u.hash || u.username) problems.push(`${at}.clientConfig.url`);
    }
    if (cc.service && !cc.service.path.startsWith('/')) problems.push(`${at}.clientConfig.service.path`);
    if (!Buffer.from(cc.caBundle, 'base64').toString().includes('BEGIN CERTIFICATE')) problems.push(`${at}.caBundle`);
    if (!['None', 'NoneOnDryRun'].includes(w.sideEffects)) problems.push(`${at}.sideEffects`);
    if (w.timeoutSeconds < 1 || w.timeoutSeconds > 30) problems.push(`${at}.timeoutSeconds`);
    if (!w.admissionReviewVersions.includes('v1')) problems.push(`${at}.admissionReviewVersions`);
    if (obj.kind === 'ValidatingWebhookConfiguration' && 'reinvocationPolicy' in w)
      problems.push(`${at}.reinvocationPolicy`);
    for (const sel of [w.namespaceSelector, w.objectSelector]) {
      for (const e of sel.matchExpressions ?? []) {
        const needsValues = e.operator === 'In' || e.operator === 'NotIn';
        if (needsValues !== Boolean(e.values?.length)) problems.push(`${at} selector ${e.key} ${e.operator}`);
      }
    }
    if (w.matchConditions && w.matchConditions.length > 64) problems.push(`${at}.matchConditions`);
  }
  const Model =
    obj.kind === 'MutatingWebhookConfiguration' ? MutatingWebhookConfiguration : ValidatingWebhookConfiguration;
  try {
    new Model(obj as never).validate();
  } catch (err) {
    problems.push(`schema: ${String(err)}`);
  }
  return problems;
}

describe('buildWebhookConfigurations', () => {
  it('for 1.26: selectors, Fail only where it cannot touch other pods, valid for 1.26', () => {
    const { mutating, validating } = buildWebhookConfigurations({
      config,
      names,
      caBundlePem: CA,
      scoping: 'selectors',
    });
    expect(problemsOf(mutating, FIELDS_1_26)).toEqual([]);
    expect(problemsOf(validating, FIELDS_1_26)).toEqual([]);
    expect(mutating.metadata.name).toBe('vcuda-mutate-pods');
    expect(mutating.webhooks.map((w) => [w.name, w.failurePolicy, w.namespaceSelector])).toEqual([
      [
        'mutate.pods.vcuda.io',
        'Fail',
        {
          matchExpressions: [
            { key: 'vcuda.io/admission', operator: 'In', values: ['enforce'] },
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] },
          ],
        },
      ],
      [
        'mutate-unlabelled-namespaces.pods.vcuda.io',
        'Ignore',
        {
          matchExpressions: [
            { key: 'vcuda.io/admission', operator: 'NotIn', values: ['enforce'] },
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system'] },
          ],
        },
      ],
    ]);
    const [v] = validating.webhooks;
    expect(v?.failurePolicy).toBe('Fail');
    expect(v?.objectSelector).toEqual({ matchExpressions: [{ key: 'vcuda.io/gpu', operator: 'Exists' }] });
    expect(v?.rules).toEqual([
      {
        operations: ['CREATE', 'UPDATE'],
        apiGroups: [''],
        apiVersions: ['v1'],
        resources: ['pods'],
        scope: 'Namespaced',
      },
    ]);
    for (const w of [...mutating.webhooks, ...validating.webhooks]) {
      expect(w.sideEffects).toBe('None');
      expect(w.timeoutSeconds).toBe(5);
      expect(Buffer.from(w.clientConfig.caBundle, 'base64').toString()).toBe(CA);
      expect(w.clientConfig.service).toEqual({
        namespace: 'vcuda-system',
        name: 'vcuda-control-plane',
        port: 443,
        path: w.name.startsWith('mutate') ? '/admission/mutate' : '/admission/validate',
      });
    }
  });

  it('from 1.28: one Fail webhook per kind scoped by a CEL condition on vcuda resources', () => {
    const { mutating, validating } = buildWebhookConfigurations({
      config,
      names,
      caBundlePem: CA,
      scoping: 'match-conditions',
    });
    expect(problemsOf(mutating)).toEqual([]);
    expect(problemsOf(validating)).toEqual([]);
    for (const cfg of [mutating, validating]) {
      expect(cfg.webhooks).toHaveLength(1);
      expect(cfg.webhooks[0]?.failurePolicy).toBe('Fail');
      expect(cfg.webhooks[0]?.matchConditions).toEqual([
        { name: 'requests-vcuda-resources', expression: requestsVcudaExpression(names) },
      ]);
      expect(cfg.webhooks[0]?.objectSelector).toEqual({});
    }
    expect(mutating.webhooks[0]?.rules[0]?.operations).toEqual(['CREATE']);
    // Not valid for 1.26: that is why 1.26 gets the selectors.
    expect(problemsOf(mutating, FIELDS_1_26)).toEqual(['webhooks[0].matchConditions unknown']);
  });

  it('points at a URL when the control plane runs outside the cluster', () => {
    const outside = registrationConfigSchema.parse({ url: 'https://127.0.0.1:8443/', timeoutSeconds: 3 });
    const { mutating, validating } = buildWebhookConfigurations({
      config: outside,
      names,
      caBundlePem: CA,
      scoping: 'selectors',
    });
    expect(mutating.webhooks[0]?.clientConfig).toEqual({
      url: 'https://127.0.0.1:8443/admission/mutate',
      caBundle: Buffer.from(CA).toString('base64'),
    });
    expect(validating.webhooks[0]?.clientConfig.url).toBe('https://127.0.0.1:8443/admission/validate');
    expect(problemsOf(mutating, FIELDS_1_26)).toEqual([]);
    expect(() => registrationConfigSchema.parse({ url: 'http://127.0.0.1:8443' })).toThrow();
  });

  it('the CEL condition names the configured resource domain, init containers and requests included', () => {
    const expr = requestsVcudaExpression(resourceNames('tencent.com'));
    expect(expr).toContain("'tencent.com/vcuda-core' in c.resources.limits");
    expect(expr).toContain("'tencent.com/vcuda-memory' in c.resources.requests");
    expect(expr).toContain('has(object.spec.initContainers) && object.spec.initContainers.exists(');
    expect(expr).not.toContain('nvidia.com');
  });
});

describe('DRA mode for pods', () => {
  it('declares NoneOnDryRun on the mutating hook only: it creates claim templates, never on a dry run', () => {
    const input = { config, names, caBundlePem: CA, scoping: 'match-conditions' as const };
    const plain = buildWebhookConfigurations(input);
    const dra = buildWebhookConfigurations({ ...input, createsClaimTemplates: true });
    expect(plain.mutating.webhooks.map((w) => w.sideEffects)).toEqual(['None']);
    expect(dra.mutating.webhooks.map((w) => w.sideEffects)).toEqual(['NoneOnDryRun']);
    expect(dra.validating).toEqual(plain.validating);
  });
});

describe('the matchCondition, evaluated as CEL', () => {
  const fixture = (name: string) =>
    JSON.parse(readFileSync(new URL(`./testdata/kubernetes-1.26/admission-${name}.json`, import.meta.url), 'utf8'))
      .request.object;
  const c = (resources: object) => ({ name: 'c', image: 'x', resources });
  const podOf = (containers: object[], initContainers?: object[]) => ({
    metadata: { name: 'p' },
    spec: { containers, ...(initContainers ? { initContainers } : {}) },
  });
  const cases: [string, object, boolean][] = [
    ['real share-30 pod', fixture('mutate-create-share'), true],
    ['real init + whole + share pod', fixture('mutate-create-multi-container'), true],
    ['real pod without GPU', fixture('mutate-create-no-gpu'), false],
    ['memory only in requests', podOf([c({ requests: { 'nvidia.com/vcuda-memory': '1' } })]), true],
    ['only an init container asks', podOf([c({})], [c({ limits: { 'nvidia.com/vcuda-core': '100' } })]), true],
    ['another domain', podOf([c({ limits: { 'tencent.com/vcuda-core': '30' } })]), false],
    ['plain cpu and nvidia.com/gpu', podOf([c({ limits: { cpu: '1', 'nvidia.com/gpu': '1' } })]), false],
    ['no resources at all', podOf([{ name: 'c', image: 'x' }]), false],
  ];
  it.each(cases)('%s -> %s', (_name, object, expected) => {
    expect(evaluate(requestsVcudaExpression(names), { object })).toBe(expected);
  });
});

describe('versions', () => {
  it.each([
    [{ major: '1', minor: '26' }, 'selectors'],
    [{ major: '1', minor: '27' }, 'selectors'],
    [{ major: '1', minor: '28' }, 'match-conditions'],
    [{ major: '1', minor: '29+' }, 'match-conditions'],
    [{ major: '2', minor: '0' }, 'match-conditions'],
  ])('%o -> %s', (info, scoping) => {
    const v = parseServerVersion(info);
    expect(v && chooseScoping(v, config)).toBe(scoping);
  });

  it('an unreadable version is undefined', () => {
    expect(parseServerVersion({ major: '', minor: 'x' })).toBeUndefined();
  });
});

/**
 * An API server in memory: fills defaults like the real one, keeps resourceVersions, and (like a
 * server whose AdmissionWebhookMatchConditions gate is off) can drop matchConditions.
 */
function fakeApiServer(version: { major: string; minor: string }, opts: { dropsMatchConditions?: boolean } = {}) {
  const objects = new Map<string, StoredConfiguration & { kind: string }>();
  let rv = 0;
  let writes = 0;
  let conflictsToInject = 0;
  const store = (obj: WebhookConfiguration): StoredConfiguration => {
    const copy = structuredClone(obj) as WebhookConfiguration & StoredConfiguration;
    copy.webhooks = copy.webhooks.map((w) => {
      const stored: Record<string, unknown> = { ...w, rules: w.rules.map((r) => ({ ...r })) };
      if (opts.dropsMatchConditions) delete stored.matchConditions;
      if (Object.keys(w.objectSelector).length === 0) stored.objectSelector = {};
      return stored as never;
    });
    copy.metadata = { ...copy.metadata, resourceVersion: String(++rv) };
    objects.set(`${obj.kind}/${obj.metadata.name}`, copy);
    writes++;
    return structuredClone(copy);
  };
  const client: WebhookConfigurationClient = {
    serverVersion: async () => ({ ...version, gitVersion: `v${version.major}.${version.minor}.0` }),
    read: async (kind, name) => structuredClone(objects.get(`${kind}/${name}`)),
    create: async (obj) => {
      if (objects.has(`${obj.kind}/${obj.metadata.name}`)) throw new VcudaError('conflict', 'exists');
      return store(obj);
    },
    replace: async (obj) => {
      const current = objects.get(`${obj.kind}/${obj.metadata.name}`);
      if (conflictsToInject > 0) {
        conflictsToInject--;
        // Another replica wrote in between.
        if (current?.metadata) current.metadata.resourceVersion = String(++rv);
      }
      if (current?.metadata?.resourceVersion !== obj.metadata.resourceVersion)
        throw new VcudaError('conflict', 'stale');
      return store(obj);
    },
  };
  return {
    client,
    writes: () => writes,
    get: (kind: string, name: string) => objects.get(`${kind}/${name}`),
    injectConflicts: (n: number) => {
      conflictsToInject = n;
    },
  };
}

describe('ensureWebhookRegistration', () => {
  const input = { config, names, caBundlePem: CA };

  it('on 1.26 creates both with selectors, then leaves them alone, then follows a new caBundle', async () => {
    const api = fakeApiServer({ major: '1', minor: '26' });
    expect(await ensureWebhookRegistration(api.client, input)).toEqual({
      serverVersion: 'v1.26.0',
      scoping: 'selectors',
      mutating: 'created',
      validating: 'created',
    });
    expect(await ensureWebhookRegistration(api.client, input)).toMatchObject({
      mutating: 'unchanged',
      validating: 'unchanged',
    });
    expect(api.writes()).toBe(2);
    const rotated = await ensureWebhookRegistration(api.client, { ...input, caBundlePem: `${CA}${CA}` });
    expect(rotated).toMatchObject({ mutating: 'updated', validating: 'updated' });
    const stored = api.get('ValidatingWebhookConfiguration', 'vcuda-validate-pods') as {
      webhooks: { clientConfig: { caBundle: string } }[];
    };
    expect(Buffer.from(stored.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString()).toBe(`${CA}${CA}`);
  });

  it('on 1.28 uses matchConditions, and removes them again when moved to selectors', async () => {
    const api = fakeApiServer({ major: '1', minor: '28' });
    expect(await ensureWebhookRegistration(api.client, input)).toMatchObject({ scoping: 'match-conditions' });
    const stricter = { ...input, config: { ...config, matchConditionsFromMinor: 40 } };
    expect(await ensureWebhookRegistration(api.client, stricter)).toMatchObject({
      scoping: 'selectors',
      mutating: 'updated',
      validating: 'updated',
    });
    const stored = api.get('MutatingWebhookConfiguration', 'vcuda-mutate-pods') as { webhooks: object[] };
    expect(stored.webhooks.every((w) => !('matchConditions' in w))).toBe(true);
  });

  it('falls back to selectors when the API server drops matchConditions (feature gate off)', async () => {
    const api = fakeApiServer({ major: '1', minor: '27' }, { dropsMatchConditions: true });
    const early = { ...input, config: { ...config, matchConditionsFromMinor: 27 } };
    const out = await ensureWebhookRegistration(api.client, early);
    expect(out.scoping).toBe('selectors');
    expect(out.note).toBe('API server v1.27.0 dropped matchConditions; using selectors');
    const stored = api.get('MutatingWebhookConfiguration', 'vcuda-mutate-pods') as {
      webhooks: { failurePolicy: string }[];
    };
    expect(stored.webhooks.map((w) => w.failurePolicy)).toEqual(['Fail', 'Ignore']);
  });

  it('retries a write that lost a race with another replica', async () => {
    const api = fakeApiServer({ major: '1', minor: '26' });
    await ensureWebhookRegistration(api.client, input);
    api.injectConflicts(2);
    expect(await ensureWebhookRegistration(api.client, { ...input, caBundlePem: `${CA}\n` })).toMatchObject({
      mutating: 'updated',
      validating: 'updated',
    });
  });

  it('propagates other API errors', async () => {
    const api = fakeApiServer({ major: '1', minor: '26' });
    const failing = { ...api.client, create: async () => Promise.reject(new VcudaError('forbidden', 'RBAC says no')) };
    await expect(ensureWebhookRegistration(failing, input)).rejects.toMatchObject({ code: 'forbidden' });
  });
});

describe('isSubsetOf', () => {
  it.each([
    [{ a: 1 }, { a: 1, b: 2 }, true],
    [{ a: 1 }, { a: 2 }, false],
    [{ a: {} }, {}, true],
    [{ a: [] }, {}, true],
    [{ a: [1, 2] }, { a: [1] }, false],
    [{ a: [{ x: 1 }] }, { a: [{ x: 1, y: 0 }] }, true],
    [{ a: { b: 'c' } }, { a: null }, false],
  ])('%o within %o: %s', (want, have, expected) => {
    expect(isSubsetOf(want, have)).toBe(expected);
  });
});
