/**
 * Pods written for vcuda today, admitted on a DRA cluster, on the real Kubernetes 1.36 control
 * plane (`../shared/kubernetes-1.36/`: kube-apiserver, kube-scheduler with its DynamicResources
 * allocator, kube-controller-manager's resourceclaim controller). vcuda's mutating hook runs in DRA
 * mode (`webhook.dra.convertPods`) and registers as the control plane registers it, with the claim
 * hooks beside it; its templates are made through client-node. A pod with an init container, two
 * shares of one shape under a soft limit and two whole cards is stored with one claim per container
 * and no vcuda extended resource, the server accepts the templates (through vcuda's own claim
 * hooks), and kube-scheduler allocates every claim on the node that publishes vcuda's slice.
 * A bad pod is refused with the extender mode's message, and a dry run makes no template.
 */

import { KubeConfig } from '@kubernetes/client-node';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWholeQuantity, resourceNames } from '../../contract/index.js';
import { ensureClaimTemplatesWith, kubeClaimTemplateStore } from '../../control-plane/claim-templates.js';
import { type Listening, listen } from '../../control-plane/starters/http-listener.js';
import { refusalMessage } from '../../webhooks/admission-review.js';
import { admissionRoutes } from '../../webhooks/admission-routes.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { buildClaimWebhookConfigurations } from '../../webhooks/claim-registration.js';
import { registrationConfigSchema } from '../../webhooks/config.js';
import { mutatePodCreate } from '../../webhooks/mutate.js';
import { claimTemplateOf } from '../../webhooks/pod-claims.js';
import { buildWebhookConfigurations } from '../../webhooks/registration.js';
import { adminKubectl, createDeviceClass, createDraNode, DRIVER, waitFor } from '../support/dra-real.js';
import { type Kubernetes136, k8s136SkipReason, startKubernetes136 } from '../support/kubernetes-136.js';
import { fakeCards } from '../support/node-agent/fake-gpu-source.js';

const skipReason = k8s136SkipReason();
if (skipReason) console.warn(`dra-pods-real: skipped: ${skipReason}`);

const NODE = 'node-1';
const NS = 'ml';
const names = resourceNames('nvidia.com');

/** The pod as its author wrote it for the extender: nothing in it knows about DRA. */
function vcudaPod(name: string, containers: [string, Record<string, string>][], init?: Record<string, string>) {
  const container = ([n, limits]: [string, Record<string, string>]) => ({
    name: n,
    image: 'none',
    resources: { limits },
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, annotations: { [names.coreLimit]: '60' } },
    spec: {
      ...(init ? { initContainers: [container(['setup', init])] } : {}),
      containers: containers.map(container),
      terminationGracePeriodSeconds: 0,
    },
  };
}
const share = (core: number, mib: number) => ({ [names.core]: String(core), [names.memory]: String(mib) });

/** vcuda's admission hooks over HTTPS, DRA mode on, registered as the control plane registers them. */
async function startAdmission(k8s: Kubernetes136): Promise<Listening> {
  const kc = new KubeConfig();
  kc.loadFromFile(k8s.kubeconfig);
  const claims = { deviceClassName: DRIVER, driverName: DRIVER };
  const routes = admissionRoutes({
    names,
    memoryUnitMiB: 1,
    clusterName: 'c1',
    privilegedUsernames: [],
    maxBodyBytes: 3 << 20,
    logger: console,
    claims,
    draPods: {
      policy: { ...claims, modeValue: 'dra' },
      ensureTemplates: ensureClaimTemplatesWith(kubeClaimTemplateStore(kc), { reuseMs: 30_000 }),
      timeoutMs: 4_000,
    },
  });
  const tls = await issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 1, new Date());
  const server = await listen(new Hono().route('/admission', routes), '127.0.0.1', 0, {
    key: tls.keyPem,
    cert: tls.certPem,
  });
  const config = registrationConfigSchema.parse({ url: server.url, exemptNamespaces: ['kube-system'] });
  const pods = buildWebhookConfigurations({
    config,
    names,
    caBundlePem: tls.caPem,
    scoping: 'match-conditions',
    createsClaimTemplates: true,
  });
  const claimHooks = buildClaimWebhookConfigurations({ config, claims, caBundlePem: tls.caPem });
  // The ledger's charge hook is another suite's: only the claim rules are served here.
  const validateClaims = {
    ...claimHooks.validating,
    webhooks: claimHooks.validating.webhooks.filter((h) => !h.name.startsWith('charge.')),
  };
  for (const obj of [pods.mutating, pods.validating, claimHooks.mutating, validateClaims]) {
    await adminKubectl(k8s)(['apply', '-f', '-'], obj);
  }
  return server;
}

type Container = { name: string; resources?: { limits?: object; requests?: object; claims?: { name: string }[] } };
type StoredPod = {
  metadata: { uid: string };
  spec: {
    nodeName?: string;
    resourceClaims?: { name: string; resourceClaimTemplateName?: string }[];
    containers: Container[];
    initContainers?: Container[];
  };
  status?: { resourceClaimStatuses?: { name: string; resourceClaimName: string }[] };
};
type Result = { request: string; device: string; consumedCapacity?: Record<string, string> };
type StoredClaim = {
  metadata: { name: string; ownerReferences?: { uid: string }[] };
  status?: {
    allocation?: {
      devices: { results: Result[]; config?: { opaque?: { parameters: unknown } }[] };
      nodeSelector?: unknown;
    };
  };
};

describe.skipIf(skipReason !== undefined)('pods written for vcuda, admitted with claims on real kube 1.36', () => {
  let k8s: Kubernetes136;
  let server: Listening | undefined;
  const kubectl = (args: string[], input?: object) => adminKubectl(k8s)(args, input);
  const getJson = async <T>(args: string[]): Promise<T> => JSON.parse(await kubectl([...args, '-o', 'json'])) as T;
  const templateNames = async () =>
    (await getJson<{ items: { metadata: { name: string } }[] }>(['get', 'resourceclaimtemplates', '-n', NS])).items
      .map((t) => t.metadata.name)
      .sort();
  const badPod = vcudaPod('bad', [['main', { [names.core]: '30' }]]);

  beforeAll(async () => {
    k8s = await startKubernetes136([]);
    await kubectl(['create', 'namespace', NS]);
    await createDeviceClass(k8s);
    await createDraNode(k8s, NODE, fakeCards({ cards: 4, memoryMiB: 81_920 }));
    server = await startAdmission(k8s);
    // The API server loads webhook configurations asynchronously: wait until ours answers.
    await waitFor('the mutating hook to answer', async () => {
      const r = await k8s.kubectl(['create', '--dry-run=server', '-f', '-'], { input: JSON.stringify(badPod) });
      return r.stderr.includes('vcuda refused') ? true : undefined;
    });
  }, 300_000);

  afterAll(async () => {
    await server?.close();
    await k8s?.stop();
  }, 120_000);

  it('refuses a bad pod with the extender mode’s message, and a dry run makes no template', async () => {
    const refused = await k8s.kubectl(['create', '-f', '-'], { input: JSON.stringify(badPod) });
    expect(refused.code).not.toBe(0);
    // Word for word what the extender mode answers (the same rules, without DRA).
    const extender = mutatePodCreate(badPod, { quantity: { names, memoryUnitMiB: 1 }, privilegedUsernames: new Set() });
    if (extender.kind !== 'refused') throw new Error('the bad pod must be refused in extender mode');
    const message = refusalMessage('pod ml/bad', extender.errors);
    expect(message).toContain('a share of a card (nvidia.com/vcuda-core: 30) must state nvidia.com/vcuda-memory');
    expect(refused.stderr).toContain(`admission webhook "mutate.pods.vcuda.io" denied the request: ${message}`);
    const dry = await kubectl(
      ['create', '--dry-run=server', '-o', 'json', '-f', '-'],
      vcudaPod('dry', [['main', share(25, 4096)]]),
    );
    const dryPod = JSON.parse(dry) as StoredPod;
    expect(dryPod.spec.resourceClaims).toEqual([
      { name: 'vcuda-main', resourceClaimTemplateName: 'vcuda-c25-m4gi-l60' },
    ]);
    expect(await templateNames()).toEqual([]);
  });

  it('reuses a template of its shape made earlier, and refuses a pod whose template name asks another shape', async () => {
    const shape = (corePerCard: number) => ({
      name: 'main',
      isInit: false,
      corePerCard,
      cards: 1,
      memoryMiBPerCard: 2048,
      coreLimit: 60,
      mode: 'soft' as const,
    });
    const policy = { deviceClassName: DRIVER, driverName: DRIVER, modeValue: 'dra' };
    const same = claimTemplateOf(shape(20), NS, policy);
    const capacity = (t: ReturnType<typeof claimTemplateOf>) =>
      t.spec.spec.devices.requests[0]?.exactly.capacity?.requests ?? {};
    capacity(same).memory = '2Gi';
    const other = claimTemplateOf(shape(40), NS, policy);
    capacity(other).cores = '50';
    await kubectl(['create', '-f', '-'], same);
    await kubectl(['create', '-f', '-'], other);

    await kubectl(['create', '-f', '-'], vcudaPod('reuse', [['main', share(20, 2048)]]));
    const reused = await getJson<StoredPod>(['get', 'pod', 'reuse', '-n', NS]);
    expect(reused.spec.resourceClaims).toEqual([
      { name: 'vcuda-main', resourceClaimTemplateName: 'vcuda-c20-m2gi-l60' },
    ]);
    const forged = await k8s.kubectl(['create', '-f', '-'], {
      input: JSON.stringify(vcudaPod('forged', [['main', share(40, 2048)]])),
    });
    expect(forged.code).not.toBe(0);
    expect(forged.stderr).toContain(
      'ResourceClaimTemplate ml/vcuda-c40-m2gi-l60 exists and asks another shape; vcuda names its templates from their shape: delete or rename that one',
    );
    await kubectl(['delete', 'pod', 'reuse', '-n', NS, '--grace-period=0', '--force']);
  });

  it('stores the pod with one claim per container, and kube-scheduler allocates them on the vcuda node', async () => {
    const pod = vcudaPod(
      'train',
      [
        ['main', share(30, 8192)],
        ['sidecar', share(30, 8192)],
        ['trainer', { [names.core]: '200' }],
      ],
      share(10, 1536),
    );
    await kubectl(['create', '-f', '-'], pod);
    const stored = await getJson<StoredPod>(['get', 'pod', 'train', '-n', NS]);
    expect(stored.spec.resourceClaims).toEqual([
      { name: 'vcuda-setup', resourceClaimTemplateName: 'vcuda-c10-m1536mi-l60' },
      { name: 'vcuda-main', resourceClaimTemplateName: 'vcuda-c30-m8gi-l60' },
      { name: 'vcuda-sidecar', resourceClaimTemplateName: 'vcuda-c30-m8gi-l60' },
      { name: 'vcuda-trainer', resourceClaimTemplateName: 'vcuda-whole-2' },
    ]);
    const all = [...(stored.spec.initContainers ?? []), ...stored.spec.containers];
    expect(all.map((c) => c.resources?.claims)).toEqual(
      ['setup', 'main', 'sidecar', 'trainer'].map((n) => [{ name: `vcuda-${n}` }]),
    );
    expect(JSON.stringify(all)).not.toContain('vcuda-core');
    expect(await templateNames()).toEqual(
      expect.arrayContaining(['vcuda-c10-m1536mi-l60', 'vcuda-c30-m8gi-l60', 'vcuda-whole-2']),
    );

    const bound = await waitFor('the pod bound with its claims allocated', async () => {
      const p = await getJson<StoredPod>(['get', 'pod', 'train', '-n', NS]);
      return p.spec.nodeName === NODE && p.status?.resourceClaimStatuses?.length === 4 ? p : undefined;
    });
    const claims = await getJson<{ items: StoredClaim[] }>(['get', 'resourceclaims', '-n', NS]);
    const byPodClaim = new Map(
      (bound.status?.resourceClaimStatuses ?? []).map((s) => [
        s.name,
        claims.items.find((c) => c.metadata.name === s.resourceClaimName),
      ]),
    );
    const consumed = (name: string) =>
      (byPodClaim.get(name)?.status?.allocation?.devices.results ?? []).map((r) =>
        Object.fromEntries(
          Object.entries(r.consumedCapacity ?? {}).map(([k, v]) => [
            k,
            (parseWholeQuantity(v) as { value: number }).value,
          ]),
        ),
      );
    const MiB = 1024 * 1024;
    expect(consumed('vcuda-setup')).toEqual([{ cores: 10, memory: 1536 * MiB }]);
    expect(consumed('vcuda-main')).toEqual([{ cores: 30, memory: 8192 * MiB }]);
    expect(consumed('vcuda-sidecar')).toEqual([{ cores: 30, memory: 8192 * MiB }]);
    expect(consumed('vcuda-trainer')).toEqual([
      { cores: 100, memory: 81_920 * MiB },
      { cores: 100, memory: 81_920 * MiB },
    ]);
    // The soft limit travels with the shares' claims, for the driver to read at Prepare.
    const limitOf = (name: string) => byPodClaim.get(name)?.status?.allocation?.devices.config?.[0]?.opaque?.parameters;
    expect(limitOf('vcuda-main')).toEqual({
      apiVersion: 'gpu.vcuda.io/v1alpha1',
      kind: 'GpuShareConfig',
      coreLimit: 60,
    });
    expect(limitOf('vcuda-trainer')).toBeUndefined();
    // Owned by the pod: deleted with it by the resourceclaim controller.
    for (const claim of byPodClaim.values()) expect(claim?.metadata.ownerReferences?.[0]?.uid).toBe(bound.metadata.uid);
  }, 180_000);
});
