/**
 * RBAC covers every Kubernetes call the code makes, and grants nothing the code does not use.
 * The calls are derived from the source (test/deploy/api-calls.ts), so a new client call without
 * its grant fails here before it fails in a cluster with 403.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_RESOURCE_DOMAIN, resourceNames } from '../../contract/index.js';
import { loadControlPlaneConfig } from '../../control-plane/config.js';
import { JWKS_CONFIGMAP_NAME, SIGNING_SECRET_NAME } from '../../control-plane/signing-keys.js';
import { buildClaimWebhookConfigurations } from '../../webhooks/claim-registration.js';
import { webhookConfigSchema } from '../../webhooks/config.js';
import { buildWebhookConfigurations } from '../../webhooks/registration.js';
import { type ApiCall, findApiCalls, parseApiPath, sourceFiles } from './api-calls.js';
import { deployDir, objectsOfKustomization, repoRoot } from './manifests.js';
import { grantedTriples, grantsFor, ruleAllows, rulesFor } from './rbac.js';

const objectsOf = (build: string) => objectsOfKustomization(`${deployDir}/${build}`).map((o) => o.object);
const objects = objectsOf('base');
const DRA_DIR = 'node-agent/dra';

/** Each component under the build that deploys it, with the source that runs there. */
const components = [
  {
    name: 'control plane',
    build: 'base',
    serviceAccount: { namespace: 'vcuda-system', name: 'vcuda-control-plane' },
    // The webhook and the ledger run inside the control-plane process, under its account.
    dirs: ['control-plane', 'webhooks', 'db', 'contract'],
  },
  {
    // The base runs the agent as a device plugin: its DRA driver (node-agent/dra) never runs there.
    name: 'node agent',
    build: 'base',
    serviceAccount: { namespace: 'vcuda-system', name: 'vcuda-node-agent' },
    dirs: ['node-agent', 'contract'],
    exclude: [DRA_DIR],
  },
  {
    name: 'control plane in DRA mode',
    build: 'overlays/dra',
    serviceAccount: { namespace: 'vcuda-system', name: 'vcuda-control-plane' },
    dirs: ['control-plane', 'webhooks', 'db', 'contract'],
  },
  {
    name: 'node agent in DRA mode',
    build: 'overlays/dra',
    serviceAccount: { namespace: 'vcuda-system', name: 'vcuda-node-agent' },
    dirs: ['node-agent', 'contract'],
  },
];

/**
 * Grants the source scan cannot see, each with its reason. Keep this short and honest: an entry
 * here is a permission no line of code visibly needs.
 */
const indirectGrants: Record<string, { verb: string; group: string; resource: string; why: string }[]> = {
  'control plane': [],
  'node agent': [],
  'control plane in DRA mode': [],
  'node agent in DRA mode': [
    ...['update', 'patch'].map((verb) => ({
      verb,
      group: 'resource.k8s.io',
      resource: 'resourceclaims/status',
      why: "status.devices: the driver's report of what each prepared share got (issue 26), granted with the driver subresource below",
    })),
    ...['associated-node:update', 'associated-node:patch'].map((verb) => ({
      verb,
      group: 'resource.k8s.io',
      resource: 'resourceclaims/driver',
      why: "1.36's granular status authorization: status.devices needs it besides resourceclaims/status; only for its node's claims",
    })),
  ],
};

const key = (c: { verb: string; group: string; resource: string }) => `${c.verb} ${c.group || 'core'}/${c.resource}`;

describe.each(components)('RBAC of the $name', (component) => {
  const excluded = (file: string) => (component.exclude ?? []).some((d) => file.startsWith(`${repoRoot}/${d}/`));
  const calls = findApiCalls(sourceFiles(component.dirs).filter((f) => !excluded(f)));
  const rules = rulesFor(objectsOf(component.build), component.serviceAccount);

  it('finds the calls it checks (the scan works)', () => {
    expect(calls.length).toBeGreaterThan(0);
    expect(rules.length).toBeGreaterThan(0);
  });

  it('grants every Kubernetes call in the source', () => {
    const missing = calls
      .filter((c) => grantsFor(rules, c).length === 0)
      .map((c) => `${key(c)} (${c.via} at ${c.where})`);
    expect(missing, 'calls without an RBAC grant in deploy/').toEqual([]);
  });

  it('grants nothing the source does not use', () => {
    const used = (t: { verb: string; group: string; resource: string }) =>
      calls.some((c) => ruleAllows({ apiGroups: [t.group], resources: [t.resource], verbs: [t.verb] }, c)) ||
      (indirectGrants[component.name] ?? []).some((i) => key(i) === key(t));
    const unused = grantedTriples(rules)
      .filter((t) => !used(t))
      .map((t) => `${key(t)} (${t.rule.from})`);
    expect(unused, 'grants no code needs: remove them or list them in indirectGrants with a reason').toEqual([]);
  });

  it('uses no wildcard', () => {
    const wild = rules.filter((r) => [r.apiGroups, r.resources, r.verbs].some((l) => (l ?? []).includes('*')));
    expect(wild.map((r) => r.from)).toEqual([]);
  });
});

describe('named grants match the names the code uses', () => {
  const webhook = webhookConfigSchema.parse({});
  const { extender } = loadControlPlaneConfig({});
  const configs = buildWebhookConfigurations({
    config: webhook.registration,
    names: resourceNames(DEFAULT_RESOURCE_DOMAIN),
    caBundlePem: '-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n',
    scoping: 'match-conditions',
  });
  const rules = rulesFor(objects, { namespace: 'vcuda-system', name: 'vcuda-control-plane' });
  const namedAllows = (verb: string, group: string, resource: string, name: string) =>
    rules.some(
      (r) =>
        ruleAllows(r, { verb, group, resource }, { ignoreNames: true }) &&
        (!r.resourceNames || r.resourceNames.includes(name)),
    );

  it.each([
    ['get', '', 'secrets', SIGNING_SECRET_NAME],
    ['get', '', 'secrets', webhook.certificates.secretName],
    ['update', '', 'secrets', webhook.certificates.secretName],
    ['get', '', 'secrets', extender.certificates.secretName],
    ['update', '', 'secrets', extender.certificates.secretName],
    ['update', '', 'configmaps', JWKS_CONFIGMAP_NAME],
    ['get', 'admissionregistration.k8s.io', 'mutatingwebhookconfigurations', configs.mutating.metadata.name],
    ['update', 'admissionregistration.k8s.io', 'mutatingwebhookconfigurations', configs.mutating.metadata.name],
    ['get', 'admissionregistration.k8s.io', 'validatingwebhookconfigurations', configs.validating.metadata.name],
    ['update', 'admissionregistration.k8s.io', 'validatingwebhookconfigurations', configs.validating.metadata.name],
  ])('%s %s/%s %s', (verb, group, resource, name) => {
    expect(namedAllows(verb, group, resource, name)).toBe(true);
  });

  it('lets the control plane keep the claim hooks’ configurations in DRA mode, and only there', () => {
    const claimConfigs = buildClaimWebhookConfigurations({
      config: webhook.registration,
      claims: webhook.claims,
      caBundlePem: '',
    });
    const draRules = rulesFor(objectsOf('overlays/dra'), { namespace: 'vcuda-system', name: 'vcuda-control-plane' });
    for (const { kind, metadata } of [claimConfigs.mutating, claimConfigs.validating]) {
      const resource = `${kind.toLowerCase()}s`;
      for (const verb of ['get', 'update']) {
        const allows = (list: typeof rules) =>
          list.some(
            (r) =>
              ruleAllows(r, { verb, group: 'admissionregistration.k8s.io', resource }, { ignoreNames: true }) &&
              (!r.resourceNames || r.resourceNames.includes(metadata.name)),
          );
        expect(allows(draRules), `${verb} ${metadata.name}`).toBe(true);
        expect(allows(rules), `${verb} ${metadata.name} in the base`).toBe(false);
      }
    }
  });

  it('keeps the control plane’s Secrets and ConfigMaps in its own namespace (a Role, not a ClusterRole)', () => {
    const secretRules = rules.filter((r) => (r.resources ?? []).some((x) => x === 'secrets' || x === 'configmaps'));
    expect(secretRules.length).toBeGreaterThan(0);
    expect(secretRules.every((r) => r.namespace === 'vcuda-system')).toBe(true);
  });
});

describe('the scan itself', () => {
  it.each([
    ['/api/v1/namespaces/{namespace}/pods/{name}/binding', { group: '', resource: 'pods/binding', isNamed: true }],
    ['/api/v1/pods', { group: '', resource: 'pods', isNamed: false }],
    ['/api/v1/nodes/{name}/status', { group: '', resource: 'nodes/status', isNamed: true }],
    [
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}',
      { group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations', isNamed: true },
    ],
    [
      '/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases',
      { group: 'coordination.k8s.io', resource: 'leases', isNamed: false },
    ],
  ])('parses %s', (path, want) => {
    expect(parseApiPath(path)).toEqual(want);
  });

  it('sees a client call and an informer path, and fails RBAC for an ungranted one', async () => {
    const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-scan-'));
    try {
      const file = join(dir, 'sample.ts');
      writeFileSync(
        file,
        [
          "const inf = makeInformer(kc, '/apis/apps/v1/deployments', () => apps.listDeploymentForAllNamespaces());",
          'await coordination.replaceNamespacedLease({ name, namespace, body });',
          '// await core.deleteNamespacedPod({ name, namespace }); comments do not count',
          'await new Watch(kc).watch(',
          "  '/api/v1/namespaces/ns/configmaps',",
          '  {},',
          ');',
        ].join('\n'),
      );
      const calls: ApiCall[] = findApiCalls([file]);
      expect(calls.map(key).sort()).toEqual([
        'list apps/deployments',
        'list apps/deployments',
        'list core/configmaps',
        'update coordination.k8s.io/leases',
        'watch apps/deployments',
        'watch core/configmaps',
      ]);
      const rules = rulesFor(objects, { namespace: 'vcuda-system', name: 'vcuda-control-plane' });
      expect(calls.filter((c) => grantsFor(rules, c).length === 0).length).toBe(6);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
