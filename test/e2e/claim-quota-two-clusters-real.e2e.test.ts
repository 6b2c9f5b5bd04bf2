/**
 * One team quota across two clusters on what their DRA claims consume: two real Kubernetes 1.36
 * control planes (kube-apiserver, kube-scheduler, kube-controller-manager) share one PostgreSQL
 * ledger through each cluster's charge hook (its own process), with a team quota of 100 cores over
 * namespace `ml` in both. Ten 30-core claims race, five per cluster; one cluster's hook is killed
 * with SIGKILL mid-race and started again. The team never holds more than 100 cores at any
 * observation, every refusal names the team quota and by how much it is over, and once the
 * reconcile has run the ledger equals the allocations both API servers hold, with 3 claims
 * allocated (100 / 30).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClaimLedger } from '../../control-plane/claim-ledger/claim-ledger.js';
import { kubeClaimLister, reconcileClaimsOnce } from '../../control-plane/claim-ledger/claim-reconcile.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../support/db/test-databases.js';
import {
  adminKubectl,
  createDeviceClass,
  createDraNode,
  DRIVER,
  loopbackTls,
  registerChargeHook,
} from '../support/dra-real.js';
import { type Kubernetes136, k8s136SkipReason, startKubernetes136 } from '../support/kubernetes-136.js';
import { fakeCards } from '../support/node-agent/fake-gpu-source.js';

const skipReason = k8s136SkipReason() ?? ((await isPostgresReachable()) ? undefined : 'PostgreSQL unreachable');
if (skipReason) console.warn(`claim-quota-two-clusters-real: skipped: ${skipReason}`);

const repositoryRoot = fileURLToPath(new URL('../..', import.meta.url));
const CLUSTERS = ['c1', 'c2'] as const;
const PER_CLUSTER = 5;
const TEAM_LIMIT = 100;
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

type Claim = { metadata: { name: string; uid: string }; status?: { allocation?: unknown } };
type Pod = { status?: { conditions?: { type: string; message?: string }[] } };

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** A cluster's charge hook in its own process; resolves once it serves, with its url. */
function startHookProcess(settings: object): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/support/charge-hook-process.ts', JSON.stringify(settings)],
    {
      cwd: repositoryRoot,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('charge hook process did not start within 60 s')), 60_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      const url = /ready (\S+)/.exec(chunk.toString())?.[1];
      if (url) {
        clearTimeout(timer);
        resolve({ child, url });
      }
    });
    child.once('exit', (code) => reject(new Error(`charge hook process exited with ${code}`)));
  });
}

describe.skipIf(skipReason !== undefined)('one team quota on claims across two real 1.36 clusters', () => {
  const k8s: Partial<Record<(typeof CLUSTERS)[number], Kubernetes136>> = {};
  const hooks: ChildProcess[] = [];
  let db: TestDatabase;
  let ledger: Ledger;
  let tls: Awaited<ReturnType<typeof loopbackTls>>;

  const hookSettings = (cluster: string) => ({ dbUrl: db.url, cluster, keyPem: tls.keyPem, certPem: tls.certPem });
  const teamUsed = async () => (await ledger.listQuotas()).find((q) => q.name === 'team-100')?.coreUsed ?? 0;
  const claimsOf = async (c: (typeof CLUSTERS)[number]) =>
    JSON.parse(await adminKubectl(k8s[c] as Kubernetes136)(['get', 'resourceclaims', '-n', 'ml', '-o', 'json'])) as {
      items: Claim[];
    };
  const allocated = async (c: (typeof CLUSTERS)[number]) =>
    (await claimsOf(c)).items
      .filter((x) => x.status?.allocation)
      .map((x) => `claim:${x.metadata.uid}`)
      .sort();
  /** The PodScheduled message of every pod whose claim is not allocated, in both clusters. */
  const refusalsNow = async () => {
    const refusals: string[] = [];
    for (const c of CLUSTERS) {
      for (const claim of (await claimsOf(c)).items.filter((x) => !x.status?.allocation)) {
        const name = claim.metadata.name.replace('share', 'pod');
        const pod = JSON.parse(
          await adminKubectl(k8s[c] as Kubernetes136)(['get', 'pod', name, '-n', 'ml', '-o', 'json']),
        ) as Pod;
        refusals.push(pod.status?.conditions?.find((x) => x.type === 'PodScheduled')?.message ?? '');
      }
    }
    return refusals;
  };
  const held = async (c: string) => (await ledger.liveClaimHolders(c)).map((h) => h.holder).sort();

  beforeAll(async () => {
    const [one, two] = await Promise.all([startKubernetes136([]), startKubernetes136([])]);
    k8s.c1 = one;
    k8s.c2 = two;
    db = await createTestDatabase('postgres');
    ledger = createLedger(db.db, { clock: () => new Date(), groupCommit: false });
    await ledger.setTeam(
      'ml-team',
      CLUSTERS.map((cluster) => ({ cluster, namespace: 'ml' })),
    );
    await ledger.setQuota({
      name: 'team-100',
      scope: 'team',
      team: 'ml-team',
      coreLimit: TEAM_LIMIT,
      memoryLimitMiB: 10_000_000,
    });
    tls = await loopbackTls();
    for (const c of CLUSTERS) {
      const cluster = k8s[c] as Kubernetes136;
      // Card UUIDs are unique across the ledger: each cluster's fake cards get their own.
      const cards = fakeCards({ cards: 4, memoryMiB: 81_920 }).map((card) => ({ ...card, uuid: `${card.uuid}-${c}` }));
      await ledger.upsertNode(
        c,
        'node-1',
        cards.map((card) => ({ uuid: card.uuid, index: card.index, model: card.model, memoryMiB: 81_920 })),
      );
      const hook = await startHookProcess(hookSettings(c));
      hooks.push(hook.child);
      await adminKubectl(cluster)(['create', 'namespace', 'ml']);
      await registerChargeHook(cluster, hook.url, tls.caPem);
      await createDeviceClass(cluster);
      await createDraNode(cluster, 'node-1', cards);
    }
  }, 300_000);

  afterAll(async () => {
    for (const h of hooks) h.kill('SIGKILL');
    await Promise.all(CLUSTERS.map((c) => k8s[c]?.stop()));
    await db?.drop();
  }, 120_000);

  it('never holds more than the team quota, says why it refuses, and equals the allocations after a kill -9', async () => {
    let maxUsed = 0;
    let observing = true;
    const observer = (async () => {
      while (observing) {
        maxUsed = Math.max(maxUsed, await teamUsed());
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const create = (c: (typeof CLUSTERS)[number], i: number) => {
      const claim = {
        apiVersion: 'resource.k8s.io/v1',
        kind: 'ResourceClaim',
        metadata: { name: `share-${i}`, namespace: 'ml' },
        spec: {
          devices: {
            requests: [
              {
                name: 'gpu',
                exactly: { deviceClassName: DRIVER, capacity: { requests: { cores: '30', memory: '1Gi' } } },
              },
            ],
          },
        },
      };
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `pod-${i}`, namespace: 'ml' },
        spec: {
          resourceClaims: [{ name: 'gpu', resourceClaimName: `share-${i}` }],
          containers: [{ name: 'main', image: 'none', resources: { claims: [{ name: 'gpu' }] } }],
        },
      };
      return adminKubectl(k8s[c] as Kubernetes136)(['create', '-f', '-'], {
        apiVersion: 'v1',
        kind: 'List',
        items: [claim, pod],
      });
    };
    await Promise.all(CLUSTERS.flatMap((c) => Array.from({ length: PER_CLUSTER }, (_, i) => create(c, i))));

    // c1's hook dies with the race under way (SIGKILL: mid-request, mid-transaction), then returns.
    await waitFor('a first charge', async () => ((await teamUsed()) > 0 ? true : undefined));
    hooks[0]?.kill('SIGKILL');
    const restarted = await startHookProcess(hookSettings('c1'));
    hooks.push(restarted.child);
    await registerChargeHook(k8s.c1 as Kubernetes136, restarted.url, tls.caPem);

    // The reconcile (the control plane's, every minute) repairs what the kill left; here at once.
    const reconcile = async (c: (typeof CLUSTERS)[number]) => {
      const kc = new KubeConfig();
      kc.loadFromFile((k8s[c] as Kubernetes136).kubeconfig);
      await reconcileClaimsOnce({
        list: kubeClaimLister(kc),
        claims: createClaimLedger({ ledger, cluster: c, driver: DRIVER }),
        now: () => new Date(),
        // A charge whose write is still on its way to etcd is not released (production waits 30 s).
        skewMs: 3_000,
        log: quiet,
        notServed: () => undefined,
      });
    };
    await waitFor('3 claims allocated and the ledger equal to them in both clusters', async () => {
      for (const c of CLUSTERS) await reconcile(c);
      const all = [...(await allocated('c1')), ...(await allocated('c2'))];
      const same = await Promise.all(
        CLUSTERS.map(async (c) => JSON.stringify(await held(c)) === JSON.stringify(await allocated(c))),
      );
      return all.length === 3 && same.every(Boolean) ? true : undefined;
    });
    observing = false;
    await observer;
    expect(maxUsed).toBeLessThanOrEqual(TEAM_LIMIT);
    expect(await teamUsed()).toBe(90);

    // Every pod left out is refused by the team quota, in the ledger's words (a pod whose last try
    // met the killed hook says so until kube-scheduler's next try).
    const quotaRefusal = /quota team-100 \(team ml-team\): core limit 100, in use 90, claim asks 30 \(over by 20\)/;
    const refusals = await waitFor('every pod left out refused by the team quota', async () => {
      const found = await refusalsNow();
      return found.length === 2 * PER_CLUSTER - 3 && found.every((r) => quotaRefusal.test(r)) ? found : undefined;
    });
    expect(refusals).toHaveLength(2 * PER_CLUSTER - 3);
  }, 300_000);
});
