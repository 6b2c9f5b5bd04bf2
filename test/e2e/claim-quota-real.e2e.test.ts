/**
 * One quota on what DRA claims consume, on the real Kubernetes 1.36 control plane
 * (`../shared/kubernetes-1.36/`: kube-apiserver, kube-scheduler with its DynamicResources
 * allocator, kube-controller-manager's resourceclaim controller): a namespace quota of 50 cores and
 * two pods with a 30-core claim each on one node of two cards. kube-scheduler allocates both; the
 * ledger's charge hook admits the first allocation and refuses the second, so its claim stays
 * unallocated and its pod pending with the ledger's words; deleting the first pod clears its
 * allocation, the hook releases it, and the second is allocated on kube-scheduler's retry.
 * The ledger equals the allocations at every step.
 */

import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DRA_DRIVER } from '../../contract/index.js';
import { claimChargeRoute } from '../../control-plane/claim-ledger/claim-charge-route.js';
import { createClaimLedger } from '../../control-plane/claim-ledger/claim-ledger.js';
import { type Listening, listen } from '../../control-plane/starters/http-listener.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { buildResourceSlice } from '../../node-agent/dra/resource-slice.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { buildClaimWebhookConfigurations } from '../../webhooks/claim-registration.js';
import { registrationConfigSchema } from '../../webhooks/config.js';
import { createTestDatabase, type TestDatabase } from '../support/db/test-databases.js';
import { type Kubernetes136, k8s136SkipReason, startKubernetes136 } from '../support/kubernetes-136.js';
import { fakeCards } from '../support/node-agent/fake-gpu-source.js';

const skipReason = k8s136SkipReason();
if (skipReason) console.warn(`claim-quota-real: skipped: ${skipReason}`);

const DRIVER = DEFAULT_DRA_DRIVER;
const NODE = 'node-1';
const CARDS = fakeCards({ cards: 2, memoryMiB: 81_920 });

function claimManifest(name: string): object {
  return {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: { name, namespace: 'ml' },
    spec: {
      devices: {
        requests: [
          { name: 'gpu', exactly: { deviceClassName: DRIVER, capacity: { requests: { cores: '30', memory: '8Gi' } } } },
        ],
      },
    },
  };
}

function podManifest(name: string, claim: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'ml' },
    spec: {
      resourceClaims: [{ name: 'gpu', resourceClaimName: claim }],
      containers: [{ name: 'main', image: 'none', resources: { claims: [{ name: 'gpu' }] } }],
      terminationGracePeriodSeconds: 0,
    },
  };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe.skipIf(skipReason !== undefined)('one quota on what claims consume, on real kube 1.36', () => {
  let k8s: Kubernetes136;
  let db: TestDatabase;
  let ledger: Ledger;
  let server: Listening | undefined;

  const kubectl = async (args: string[], input?: object) => {
    const r = await k8s.kubectl(args, input ? { input: JSON.stringify(input) } : {});
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const getJson = async <T>(args: string[]): Promise<T> => JSON.parse(await kubectl([...args, '-o', 'json'])) as T;
  type Claim = { metadata: { uid: string }; status?: { allocation?: unknown } };
  type Pod = {
    spec: { nodeName?: string };
    status?: { conditions?: { type: string; status: string; message?: string }[] };
  };
  const held = async () => (await ledger.liveClaimHolders('c1')).map((h) => h.holder).sort();
  const allocatedHolders = async () => {
    const list = await getJson<{ items: Claim[] }>(['get', 'resourceclaims', '-n', 'ml']);
    return list.items
      .filter((c) => c.status?.allocation)
      .map((c) => `claim:${c.metadata.uid}`)
      .sort();
  };

  beforeAll(async () => {
    k8s = await startKubernetes136([]);
    db = await createTestDatabase('pglite');
    ledger = createLedger(db.db, { clock: () => new Date(), groupCommit: false });
    await ledger.upsertNode(
      'c1',
      NODE,
      CARDS.map((c) => ({ uuid: c.uuid, index: c.index, model: c.model, memoryMiB: 81_920 })),
    );
    await ledger.setQuota({
      name: 'ml-50',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 50,
      memoryLimitMiB: 1_000_000,
    });

    const tls = await issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 1, new Date());
    const claims = createClaimLedger({ ledger, cluster: 'c1', driver: DRIVER });
    const app = new Hono().route(
      '/admission/charge-claims',
      claimChargeRoute({
        claims,
        driver: DRIVER,
        maxBodyBytes: 3 << 20,
        timeoutMs: 2_000,
        authenticate: () => true,
        logger: console,
      }),
    );
    server = await listen(app, '127.0.0.1', 0, { key: tls.keyPem, cert: tls.certPem });
    const config = registrationConfigSchema.parse({ url: server.url, exemptNamespaces: ['kube-system'] });
    const built = buildClaimWebhookConfigurations({
      config,
      claims: { deviceClassName: DRIVER, driverName: DRIVER },
      caBundlePem: tls.caPem,
    });
    // Only the ledger's hook: the claim validation hooks are another suite's.
    const charge = {
      ...built.validating,
      webhooks: built.validating.webhooks.filter((h) => h.name.startsWith('charge.')),
    };

    await kubectl(['create', 'namespace', 'ml']);
    await kubectl(['apply', '-f', '-'], charge);
    await kubectl(['apply', '-f', '-'], {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: { name: DRIVER },
      spec: { selectors: [{ cel: { expression: `device.driver == '${DRIVER}'` } }] },
    });
    await kubectl(['create', '-f', '-'], {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } },
    });
    const status = {
      capacity: { cpu: '64', memory: '512Gi', pods: '110' },
      allocatable: { cpu: '64', memory: '512Gi', pods: '110' },
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'KubeletReady',
          message: 'ready',
          lastHeartbeatTime: new Date().toISOString(),
          lastTransitionTime: new Date().toISOString(),
        },
      ],
    };
    await kubectl(['patch', 'node', NODE, '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
    await kubectl(['taint', 'node', NODE, 'node.kubernetes.io/not-ready:NoSchedule-']);
    const slice = buildResourceSlice({
      driver: DRIVER,
      nodeName: NODE,
      memoryUnitMiB: 1,
      cards: CARDS.map((c) => ({ ...c, healthy: true })),
      link: () => ({ nvlinks: 0, pcie: 'system' }),
      unhealthy: 'taint',
      generation: 1,
    });
    await kubectl(['create', '-f', '-'], slice);
  }, 300_000);

  afterAll(async () => {
    await server?.close();
    await k8s?.stop();
    await db?.drop();
  }, 120_000);

  it('allocates within the quota, refuses past it with the ledger’s words, and lets the second in once the first ends', async () => {
    await kubectl(['create', '-f', '-'], claimManifest('a'));
    await kubectl(['create', '-f', '-'], claimManifest('b'));
    await kubectl(['create', '-f', '-'], podManifest('pod-a', 'a'));
    await kubectl(['create', '-f', '-'], podManifest('pod-b', 'b'));

    // One pod is bound, the other refused by the ledger at PreBind.
    const [winner, loser] = await waitFor('one pod bound and the other refused by the ledger', async () => {
      const pods = await Promise.all(['pod-a', 'pod-b'].map((p) => getJson<Pod>(['get', 'pod', p, '-n', 'ml'])));
      const bound = pods.findIndex((p) => p.spec.nodeName === NODE);
      const other = 1 - bound;
      const refusal = pods[other]?.status?.conditions?.find((c) => c.type === 'PodScheduled')?.message ?? '';
      if (bound < 0 || !refusal.includes('quota ml-50')) return undefined;
      return [['pod-a', 'pod-b'][bound] as string, { name: ['pod-a', 'pod-b'][other] as string, refusal }] as const;
    });
    expect(loser.refusal).toContain(
      'quota ml-50 (namespace c1/ml): core limit 50, in use 30, pod asks 30 (over by 10)',
    );
    expect(await held()).toEqual(await allocatedHolders());
    expect(await held()).toHaveLength(1);

    // The winner ends: the resourceclaim controller clears its allocation, the hook releases it.
    await kubectl(['delete', 'pod', winner, '-n', 'ml', '--grace-period=0', '--force']);
    await waitFor('the second pod bound', async () => {
      const pod = await getJson<Pod>(['get', 'pod', loser.name, '-n', 'ml']);
      return pod.spec.nodeName === NODE ? true : undefined;
    });
    await waitFor('the ledger equal to the allocations', async () => {
      const [h, a] = [await held(), await allocatedHolders()];
      return h.length === 1 && JSON.stringify(h) === JSON.stringify(a) ? true : undefined;
    });
  }, 240_000);
});
