/**
 * The DRA node side under load on the real control plane v1.36 (`../shared/kubernetes-1.36/`):
 * the simulated kubelet drives vcuda's real node agent in DRA mode (fake NVML) on one node
 * (test/support/dra-node-tier.ts). 20 pods made at once from one share template are all allocated
 * by kube-scheduler (no card over 100 cores), all prepared, each container under its own limit file
 * and region with its share, and all unprepared and freed when the pods go; the agent stopped
 * while those Prepares are in flight and started again on the same directories prepares every claim
 * exactly once (its checkpoint), loses none, and the pods run; a claim status an admin wrote by hand
 * that names another node's pool, or more capacity than the card has, is refused at Prepare and its
 * pod waits with the reason. Skipped, saying why, without that directory.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClaimCheckpoint, type PreparedClaim } from '../../node-agent/dra/checkpoint.js';
import { containerPaths } from '../../node-agent/limits/container-files.js';
import { type KubeObj, podPath } from '../../sim/kube-client.js';
import {
  containerLimit,
  DRA_DRIVER,
  DRA_GV,
  type DraNodeTier,
  deletePodNow,
  startDraNodeTier,
} from '../support/dra-node-tier.js';
import { real136SkipReason } from '../support/real-control-plane-136.js';

const skipReason = real136SkipReason('real kube-apiserver + kube-scheduler + kube-controller-manager v1.36');
if (skipReason) console.warn(`dra-burst-real: skipped: ${skipReason}`);

const NS = 'default';
const NODE = 'node-a';
const CLAIMS = `${DRA_GV}/namespaces/${NS}/resourceclaims`;
const TEMPLATE = 'share-5';
const PODS = 20;
const GiB = 2 ** 30;

type Result = { pool: string; device: string; shareID?: string; consumedCapacity?: Record<string, string> };
type Claim = KubeObj & { status?: { allocation?: { devices: { results: Result[] } }; reservedFor?: unknown[] } };
type Pod = KubeObj & {
  status?: {
    phase?: string;
    resourceClaimStatuses?: { name: string; resourceClaimName: string }[];
    containerStatuses?: { state?: { waiting?: { message?: string } } }[];
  };
};

const podOf = (name: string, claim: { resourceClaimTemplateName: string } | { resourceClaimName: string }) => ({
  metadata: { name, labels: { burst: 'yes' } },
  spec: {
    terminationGracePeriodSeconds: 0,
    resourceClaims: [{ name: 'gpu', ...claim }],
    containers: [{ name: 'c', image: 'cuda', resources: { claims: [{ name: 'gpu' }] } }],
  },
});

describe.skipIf(skipReason !== undefined)(
  'DRA bursts on the real 1.36 control plane, kubelet and agent simulated',
  () => {
    let tier: DraNodeTier;

    beforeAll(async () => {
      tier = await startDraNodeTier({ nodeName: NODE, cards: 2, memoryMiB: 81_920 });
      await tier.client.create(`${DRA_GV}/namespaces/${NS}/resourceclaimtemplates`, {
        metadata: { name: TEMPLATE },
        spec: {
          spec: {
            devices: {
              requests: [
                {
                  name: 'gpu',
                  exactly: { deviceClassName: DRA_DRIVER, capacity: { requests: { cores: '5', memory: '1Gi' } } },
                },
              ],
            },
          },
        },
      });
    }, 300_000);

    afterAll(async () => tier?.close(), 120_000);

    const agent = () => {
      const a = tier.node.draAgent();
      if (!a) throw new Error('the node agent is not running');
      return a;
    };
    const burstPods = async () => (await tier.client.list(`${podPath(NS)}?labelSelector=burst%3Dyes`)).items as Pod[];
    const claims = async () => (await tier.client.list(CLAIMS)).items as Claim[];

    /** Makes `PODS` pods of the template at once; `whilePreparing` runs as soon as the first claim is prepared. */
    async function burst(prefix: string, whilePreparing?: () => Promise<void>): Promise<Pod[]> {
      await Promise.all(
        Array.from({ length: PODS }, (_, i) =>
          tier.client.create(podPath(NS), podOf(`${prefix}-${i}`, { resourceClaimTemplateName: TEMPLATE })),
        ),
      );
      if (whilePreparing) {
        await expect
          .poll(() => agent().preparer.prepared().length, { timeout: 120_000, interval: 10 })
          .toBeGreaterThan(0);
        await whilePreparing();
      }
      await expect
        .poll(async () => (await burstPods()).filter((p) => p.status?.phase === 'Running').length, {
          timeout: 180_000,
          interval: 500,
        })
        .toBe(PODS);
      return burstPods();
    }

    /** Each pod's claim allocated by the scheduler as asked, prepared once, its container under its own share. */
    async function expectEveryShareServed(pods: Pod[]): Promise<PreparedClaim[]> {
      const byName = new Map((await claims()).map((c) => [c.metadata.name, c]));
      const prepared = agent().preparer.prepared();
      expect(new Set(prepared.map((p) => p.uid)).size).toBe(PODS);
      const coresByDevice = new Map<string, number>();
      const regions = new Set<string>();
      for (const pod of pods) {
        const claimName = pod.status?.resourceClaimStatuses?.[0]?.resourceClaimName as string;
        const claim = byName.get(claimName) as Claim;
        const [result, ...more] = claim.status?.allocation?.devices.results ?? [];
        expect(more).toEqual([]);
        expect(result).toMatchObject({ pool: NODE, consumedCapacity: { cores: '5', memory: '1Gi' } });
        expect(result?.shareID).toBeTruthy();
        const device = result?.device as string;
        coresByDevice.set(device, (coresByDevice.get(device) ?? 0) + 5);
        const mine = prepared.find((p) => p.uid === claim.metadata.uid) as PreparedClaim;
        expect(mine.shares).toEqual([
          expect.objectContaining({ device, shareId: result?.shareID, cores: 5, memoryBytes: GiB }),
        ]);
        const limit = containerLimit(tier, pod.metadata.uid as string, 'c');
        expect(limit?.devices).toEqual([
          expect.objectContaining({ uuid: mine.shares[0]?.uuid, coreRequest: 5, memoryLimitBytes: GiB, mode: 'hard' }),
        ]);
        expect(limit?.regionPath).toBe(containerPaths(join(tier.root, 'containers'), mine.key).regionPath);
        regions.add(limit?.regionPath as string);
      }
      expect(regions.size).toBe(PODS);
      for (const cores of coresByDevice.values()) expect(cores).toBeLessThanOrEqual(100);
      return prepared;
    }

    /** Deletes the pods with grace 0: every claim unprepared, its folder gone, and the claims deleted. */
    async function endAll(pods: Pod[], prepared: PreparedClaim[]): Promise<void> {
      await Promise.all(pods.map((p) => deletePodNow(tier.client, NS, p.metadata.name)));
      await expect.poll(() => agent().preparer.prepared().length, { timeout: 60_000 }).toBe(0);
      await expect.poll(() => tier.node.kubelet.dra.preparedClaims().length, { timeout: 60_000 }).toBe(0);
      for (const p of prepared)
        expect(existsSync(containerPaths(join(tier.root, 'containers'), p.key).dir)).toBe(false);
      await expect.poll(async () => (await claims()).length, { timeout: 60_000 }).toBe(0);
    }

    it('allocates, prepares and limits 20 shares of one template made at once, and frees them all', async () => {
      const pods = await burst('burst');
      const prepared = await expectEveryShareServed(pods);
      await endAll(pods, prepared);
    }, 400_000);

    it('prepares every claim exactly once when the agent restarts mid-burst', async () => {
      const checkpoint = join(tier.node.kubelet.dra.pluginsDir, DRA_DRIVER, 'checkpoint.json');
      let before: PreparedClaim[] = [];
      const pods = await burst('restart', async () => {
        await tier.node.stopAgent();
        before = ClaimCheckpoint.open(checkpoint).list();
        await tier.node.restartAgent();
      });
      // Stopped mid-burst: some claims prepared, not all.
      expect(before.length).toBeGreaterThan(0);
      expect(before.length).toBeLessThan(PODS);
      const prepared = await expectEveryShareServed(pods);
      // Those prepared before the restart kept their folder, shares and time: not prepared again.
      for (const b of before) expect(prepared.find((p) => p.uid === b.uid)).toEqual(b);
      expect(readdirSync(join(tier.root, 'containers')).sort()).toEqual(prepared.map((p) => p.key).sort());
      await endAll(pods, prepared);
    }, 400_000);

    it('refuses at Prepare a status an admin wrote naming another pool, or more than the card has', async () => {
      const cases = [
        { name: 'other-pool', pool: 'node-b', cores: '5', refusal: "names pool node-b, not this node's (node-a)" },
        {
          name: 'over-card',
          pool: NODE,
          cores: '150',
          refusal: 'consumedCapacity.cores 150 is more than the device has (100)',
        },
      ];
      const request = { name: 'gpu', exactly: { deviceClassName: DRA_DRIVER, capacity: { requests: { cores: '5' } } } };
      for (const c of cases) {
        const claim = await tier.client.create(CLAIMS, {
          metadata: { name: c.name },
          spec: { devices: { requests: [request] } },
        });
        // Bound by hand: the scheduler never sees it, the kubelet prepares what the status says.
        const made = podOf(c.name, { resourceClaimName: c.name });
        const pod = await tier.client.create(podPath(NS), { ...made, spec: { ...made.spec, nodeName: NODE } });
        const result = {
          request: 'gpu',
          driver: DRA_DRIVER,
          pool: c.pool,
          device: 'gpu-0',
          shareID: randomUUID(),
          consumedCapacity: { cores: c.cores, memory: '1Gi' },
        };
        await tier.client.request('PUT', `${CLAIMS}/${c.name}/status`, {
          ...claim,
          status: {
            allocation: { devices: { results: [result] } },
            reservedFor: [{ resource: 'pods', name: c.name, uid: pod.metadata.uid }],
          },
        });
      }
      for (const c of cases) {
        await expect
          .poll(
            async () => {
              const pod = (await tier.client.get(podPath(NS, c.name))) as Pod;
              return pod.status?.containerStatuses?.[0]?.state?.waiting?.message ?? '';
            },
            { timeout: 60_000, interval: 500 },
          )
          .toContain(c.refusal);
        expect(((await tier.client.get(podPath(NS, c.name))) as Pod).status?.phase).not.toBe('Running');
      }
      expect(agent().preparer.prepared()).toEqual([]);
      expect(readdirSync(join(tier.root, 'containers'))).toEqual([]);
      for (const c of cases) await deletePodNow(tier.client, NS, c.name);
      for (const c of cases) await tier.client.request('DELETE', `${CLAIMS}/${c.name}`);
    }, 180_000);
  },
);
