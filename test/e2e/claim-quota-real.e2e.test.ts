/**
 * One quota on what DRA claims consume, on the real Kubernetes 1.36 control plane
 * (`../shared/kubernetes-1.36/`: kube-apiserver, kube-scheduler with its DynamicResources
 * allocator, kube-controller-manager's resourceclaim controller): a namespace quota of 50 cores and
 * two pods with a 30-core claim each on one node of two cards. kube-scheduler allocates both; the
 * ledger's charge hook admits the first allocation and refuses the second, so its claim stays
 * unallocated and its pod pending with the ledger's words; deleting the first pod clears its
 * allocation, the hook releases it, and the second is allocated on kube-scheduler's retry. A third
 * card in MIG mode offers its 3g.40gb instance as a partition: a claim of it is charged the half of
 * its card the instance spans (50 cores), so past the quota it stays unallocated with the ledger's
 * words, and once the quota has room it is charged on the instance's own ledger card. The ledger
 * equals the allocations at every step.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { draMigProfileSelector, draMigSelector, vcudaAnnotations } from '../../contract/index.js';
import { ledgerCardsOf } from '../../control-plane/extender/ledger-nodes.js';
import type { Listening } from '../../control-plane/starters/http-listener.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { buildInventory } from '../../node-agent/inventory.js';
import { buildNodeSnapshot } from '../support/control-plane/builders.js';
import { createTestDatabase, type TestDatabase } from '../support/db/test-databases.js';
import { claimPodManifest, shareClaimManifest } from '../support/dra-manifests.js';
import {
  adminKubectl,
  createDeviceClass,
  createDraNode,
  DRIVER,
  startChargeHook,
  waitFor,
} from '../support/dra-real.js';
import { type Kubernetes136, k8s136SkipReason, startKubernetes136 } from '../support/kubernetes-136.js';
import { fakeCards } from '../support/node-agent/fake-gpu-source.js';
import { h100Instance, h100Mig } from '../support/node-agent/mig-layouts.js';

const skipReason = k8s136SkipReason();
if (skipReason) console.warn(`claim-quota-real: skipped: ${skipReason}`);

const NODE = 'node-1';
const INSTANCE = 'MIG-00000002-0000-4000-8000-000000000000';
// Two cards served in shares, and a third in MIG mode with one 3g.40gb instance (its partition).
const CARDS = fakeCards({ cards: 3, memoryMiB: 81_920 }).map((c) =>
  c.index === 2 ? { ...c, migMode: true, mig: h100Mig([h100Instance(INSTANCE, '3g.40gb', 0)]) } : c,
);
// The node's inventory as its agent publishes it and the control plane reads it: what the ledger
// registers (the instance a card of its own) and where a partition's rows are found.
const INVENTORY = buildNodeSnapshot(
  {
    metadata: {
      name: NODE,
      annotations: {
        [vcudaAnnotations.inventory]: JSON.stringify(
          buildInventory({
            nodeName: NODE,
            memoryUnitMiB: 1,
            cards: CARDS.map((c) => ({ ...c, healthy: true })),
            link: () => ({ nvlinks: 0, pcie: 'node' }),
            now: new Date(),
          }),
        ),
      },
    },
  },
  [],
);

const claimManifest = (name: string) => shareClaimManifest(name, 'ml', { cores: '30', memory: '8Gi' });
const podManifest = (name: string, claim: string) =>
  claimPodManifest(name, 'ml', claim, 'none', { terminationGracePeriodSeconds: 0 });

describe.skipIf(skipReason !== undefined)('one quota on what claims consume, on real kube 1.36', () => {
  let k8s: Kubernetes136;
  let db: TestDatabase;
  let ledger: Ledger;
  let server: Listening | undefined;

  const kubectl = (args: string[], input?: object) => adminKubectl(k8s)(args, input);
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
    await ledger.upsertNode('c1', NODE, ledgerCardsOf(INVENTORY));
    await ledger.setQuota({
      name: 'ml-50',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 50,
      memoryLimitMiB: 1_000_000,
    });

    await kubectl(['create', 'namespace', 'ml']);
    server = await startChargeHook(k8s, { ledger, cluster: 'c1', partitionNode: () => INVENTORY });
    await createDeviceClass(k8s);
    // The node and its slice come last: nothing can be allocated before the hook is registered.
    await createDraNode(k8s, NODE, CARDS);
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
    // kube-scheduler's words for a failed PreBind, on the pod's condition and its FailedScheduling
    // Event (dra-local-quota.e2e.test.ts holds the simulator to the same).
    const claim = loser.name.slice('pod-'.length);
    const words =
      `running PreBind plugin "DynamicResources": add allocation and reservation to claim ml/${claim}: ` +
      `admission webhook "charge.resourceclaims.vcuda.io" denied the request: reserve ml/${claim}: ` +
      'quota ml-50 (namespace c1/ml): core limit 50, in use 30, claim asks 30 (over by 10)';
    expect(loser.refusal).toBe(words);
    type Event = { reason: string; message: string; involvedObject: { name: string } };
    const events = (await getJson<{ items: Event[] }>(['get', 'events', '-n', 'ml'])).items;
    expect(events.filter((e) => e.involvedObject.name === loser.name && e.reason === 'FailedScheduling')).toEqual([
      expect.objectContaining({ message: words }),
    ]);
    // The claim keeps the finalizer kube-scheduler added before the refused write, unallocated.
    const refused = await getJson<Claim & { metadata: { finalizers?: string[] } }>([
      'get',
      'resourceclaim',
      claim,
      '-n',
      'ml',
    ]);
    expect(refused.metadata.finalizers).toEqual(['resource.kubernetes.io/delete-protection']);
    expect(refused.status?.allocation).toBeUndefined();
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
  it('charges a MIG partition the part of its card it spans against the namespace quota: over it, the claim stays unallocated with the ledger’s words', async () => {
    // This cluster's one DeviceClass takes cards too: the selector asks a partition first.
    const expression = `${draMigSelector(DRIVER)} && ${draMigProfileSelector(DRIVER, '3g.40gb')}`;
    const request = { name: 'gpu', exactly: { deviceClassName: DRIVER, selectors: [{ cel: { expression } }] } };
    await kubectl(['create', '-f', '-'], {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceClaim',
      metadata: { name: 'mig', namespace: 'ml' },
      spec: { devices: { requests: [request] } },
    });
    await kubectl(['create', '-f', '-'], podManifest('pod-mig', 'mig'));
    // The share claim of the test above holds 30 of the 50 cores; the 3g.40gb is charged half its card, 50.
    const words =
      'running PreBind plugin "DynamicResources": add allocation and reservation to claim ml/mig: ' +
      'admission webhook "charge.resourceclaims.vcuda.io" denied the request: reserve ml/mig: ' +
      'quota ml-50 (namespace c1/ml): core limit 50, in use 30, claim asks 50 (over by 30)';
    let last = '';
    const refusal = await waitFor('the MIG claim refused by the ledger', async () => {
      const pod = await getJson<Pod>(['get', 'pod', 'pod-mig', '-n', 'ml']);
      last = pod.status?.conditions?.find((c) => c.type === 'PodScheduled')?.message ?? '';
      return last.includes('quota ml-50') ? last : undefined;
    }).catch((err: Error) => {
      throw new Error(`${err.message}; the pod says: ${last}`);
    });
    expect(refusal).toBe(words);
    const claim = await getJson<Claim>(['get', 'resourceclaim', 'mig', '-n', 'ml']);
    expect(claim.status?.allocation).toBeUndefined();
    expect(await held()).toEqual(await allocatedHolders());

    // Room in the quota: kube-scheduler's retry is charged on the instance's own ledger card.
    await ledger.setQuota({
      name: 'ml-50',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 130,
      memoryLimitMiB: 1_000_000,
    });
    await waitFor('the MIG pod bound', async () => {
      const pod = await getJson<Pod>(['get', 'pod', 'pod-mig', '-n', 'ml']);
      return pod.spec.nodeName === NODE ? true : undefined;
    });
    const uid = (await getJson<Claim>(['get', 'resourceclaim', 'mig', '-n', 'ml'])).metadata.uid;
    const shares = await ledger.claimShares('c1', [`claim:${uid}`]);
    expect(shares.map((x) => x.cardUuid)).toEqual([INSTANCE]);
    expect(await held()).toEqual(await allocatedHolders());
  }, 240_000);
});
