/**
 * Whole MIG instances through `vcuda local --cluster sim/examples/mig-cluster.yaml`, as a user
 * drives it: `kubectl describe node` shows the `nvidia.com/mig-*` capacities the node agent's
 * plugins advertise; a pod asking `nvidia.com/mig-3g.40gb: 1` runs on an instance named by its MIG
 * UUID in its signed assignment (its CUDA program sees the instance's 40448 MiB); two more such pods
 * leave exactly one pending, since the cluster's only two 3g.40gb instances are then held; a pod
 * asking `nvidia.com/mig-1g.20gb: 1` lands on the instance at a legal placement of that profile; and
 * two share pods (`vcuda-core: 50`, `vcuda-memory: 4096`) run inside node h100-shared's shared
 * 3g.40gb instance, each granted the instance by its MIG UUID, each CUDA program seeing 4096 MiB and
 * stopping at it. Namespace `mig`'s quota of 200 core holds everything the test places, with each
 * share counted on its card's scale: half the instance, which spans half its card, costs 25. A second 1g.20gb pod, tolerating node h100-dynamic's taint, gets an instance cut
 * on that node's card kept for dynamic MIG, at a legal placement its grant names, and the instance
 * goes with the pod. The pending pod's count stays one: the dynamic node's taint keeps the
 * 3g.40gb pods off it.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  type Assignment,
  type CardInventory,
  nodeInventorySchema,
  peekAssignment,
  vcudaAnnotations,
  verifyAssignment,
} from '../../contract/index.js';
import { KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import { buildWorkloads, hasKubectl, kubectl, migPod, phaseOf, runVcuda, vcudaSync } from './e2e-helpers.js';

const NS = 'mig';
const NODE = 'h100-mig';
const SHARED_NODE = 'h100-shared';
const DYNAMIC_NODE = 'h100-dynamic';
const DYNAMIC_TOLERATION = { key: 'vcuda.io/dynamic-mig', operator: 'Equal', value: 'true', effect: 'NoSchedule' };
const EXAMPLE = join(import.meta.dirname, '..', '..', 'sim', 'examples', 'mig-cluster.yaml');

/** A share pod pinned to the node with the shared instance (no other share target is there). */
function sharePod(name: string, command: string[]) {
  const limits = { 'nvidia.com/vcuda-core': '50', 'nvidia.com/vcuda-memory': '4096' };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': SHARED_NODE },
      restartPolicy: 'Never',
      containers: [{ name: 'main', image: 'vcuda-sim/workload:1', command, resources: { limits } }],
    },
  };
}

describe('vcuda local --cluster sim/examples/mig-cluster.yaml', () => {
  it('advertises MIG capacities and places whole instances: one per pod, the third 3g.40gb pending', async () => {
    const canRunCuda = buildWorkloads();
    // The CUDA program holds its allocation while the pod runs, and prints what its device offers.
    const command = canRunCuda ? ['cuda-workload', '--alloc-mib', '1024', '--hold-seconds', '600'] : ['sleep', '600'];
    // What the namespace holds by the end, in hundredths of a card: two whole 3g.40gb (50 each), a
    // static and a dynamic 1g.20gb (25 each), and two 50 shares of the shared 3g.40gb (25 each): 200.
    // Counted on the instance's own scale, the shares would cost 100 and the second would be refused.
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-local-mig-'));
    const dataDir = join(dir, 'ledger');
    const cluster = (parse(readFileSync(EXAMPLE, 'utf8')) as { name: string }).name;
    const quota = ['quota', 'set', 'mig-200', '--cluster', cluster, '--namespace', NS, '--core', '200'];
    const set = vcudaSync([...quota, '--memory-mib', '1048576', '--data-dir', dataDir]);
    expect(set, set.stderr).toMatchObject({ status: 0, stdout: 'quota mig-200 set\n' });
    const args = ['local', '--port', '0', '--workload', 'none', '--cluster', EXAMPLE];
    const { child, output, exited } = runVcuda(args, { dataDir });
    try {
      await expect.poll(() => /ready in/.test(output()), { timeout: 90_000, interval: 250 }).toBe(true);
      const kubeconfigPath = /kubeconfig\s+(\/\S+kubeconfig)/.exec(output())![1]!;
      const kubeconfig = parse(readFileSync(kubeconfigPath, 'utf8'));
      const client = new KubeClient(kubeconfig.clusters[0].cluster.server, {
        token: kubeconfig.users[0].user.token,
        caPem: Buffer.from(kubeconfig.clusters[0].cluster['certificate-authority-data'], 'base64').toString(),
      });

      // 1. The node's capacities, as kubectl describes them once the MIG plugins registered.
      const capacities = async () => {
        const status = (await client.get(`/api/v1/nodes/${NODE}`))['status'] as { capacity?: Record<string, string> };
        return Object.entries(status.capacity ?? {}).filter(([k]) => k.startsWith('nvidia.com/mig-'));
      };
      await expect.poll(capacities, { timeout: 30_000 }).toEqual([
        ['nvidia.com/mig-1g.10gb', '1'],
        ['nvidia.com/mig-1g.20gb', '1'],
        ['nvidia.com/mig-2g.20gb', '1'],
        ['nvidia.com/mig-3g.40gb', '2'],
      ]);
      if (hasKubectl) {
        const described = kubectl(kubeconfigPath, ['describe', 'node', NODE]);
        expect(described).toMatch(/Capacity:[\s\S]*nvidia\.com\/mig-3g\.40gb:\s+2\n/);
        expect(described).toMatch(/Allocatable:[\s\S]*nvidia\.com\/mig-1g\.20gb:\s+1\n/);
      }
      const inventoryOf = async (name: string) =>
        nodeInventorySchema.parse(
          JSON.parse(
            ((await client.get(`/api/v1/nodes/${name}`))['metadata'] as { annotations: Record<string, string> })
              .annotations[vcudaAnnotations.inventory]!,
          ),
        );
      const inventory = await inventoryOf(NODE);
      const instancesOf = (profile: string) =>
        inventory.cards.flatMap((c) =>
          (c.mig?.instances ?? []).filter((i) => i.profile === profile).map((i) => ({ c, i })),
        );

      await client.create('/api/v1/namespaces', { metadata: { name: NS } });
      const jwks = JSON.parse(
        ((await client.get('/api/v1/namespaces/vcuda-system/configmaps/vcuda-jwks'))['data'] as Record<string, string>)[
          'jwks.json'
        ]!,
      );
      /** The pod's assignment, verified against the control plane's published keys. */
      const verified = async (name: string, node = NODE): Promise<Assignment> => {
        const pod = await client.get(podPath(NS, name));
        const meta = pod['metadata'] as { uid: string; annotations: Record<string, string> };
        const token = meta.annotations[vcudaAnnotations.assignment]!;
        return verifyAssignment(token, jwks, {
          podUid: meta.uid,
          node,
          nowSeconds: Math.floor(Date.now() / 1000),
        });
      };

      // 2. One 3g.40gb pod runs on an instance its signed assignment names by MIG UUID.
      await client.create(podPath(NS), migPod('train-0', '3g.40gb', { command }));
      await expect.poll(() => phaseOf(client, NS, 'train-0'), { timeout: 30_000 }).toBe('Running');
      const first = (await verified('train-0')).containers[0]!.cards;
      expect(first).toHaveLength(1);
      expect(first[0]!.uuid).toMatch(/^MIG-/);
      expect(instancesOf('3g.40gb').map(({ i }) => i.uuid)).toContain(first[0]!.uuid);
      expect(first[0]!.mig?.profile).toBe('3g.40gb');
      if (canRunCuda) {
        await expect
          .poll(async () => (await client.getText(`${podPath(NS, 'train-0')}/log?container=main`)).text, {
            timeout: 15_000,
          })
          .toContain('total_mib=40448');
      }

      // 3. Two more: the last 3g.40gb instance goes to one of them, the other waits.
      await client.create(podPath(NS), migPod('train-1', '3g.40gb', { command }));
      await client.create(podPath(NS), migPod('train-2', '3g.40gb', { command }));
      const phases = async () => [await phaseOf(client, NS, 'train-1'), await phaseOf(client, NS, 'train-2')].sort();
      await expect.poll(phases, { timeout: 30_000 }).toEqual(['Pending', 'Running']);
      const waiting = (await phaseOf(client, NS, 'train-1')) === 'Pending' ? 'train-1' : 'train-2';
      const running = waiting === 'train-1' ? 'train-2' : 'train-1';
      const why = async () =>
        (
          (await client.get(podPath(NS, waiting)))['status'] as {
            conditions?: { type: string; status: string; message?: string }[];
          }
        ).conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False')?.message ?? '';
      // kube-scheduler's own count of the node's free instances refuses it before the extender is asked.
      await expect
        .poll(why, { timeout: 15_000 })
        .toBe(
          '0/4 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb, 1 node(s) had untolerated taint {vcuda.io/dynamic-mig: true}.',
        );
      const second = (await verified(running)).containers[0]!.cards[0]!;
      expect(second.uuid).not.toBe(first[0]!.uuid);
      expect(
        instancesOf('3g.40gb')
          .map(({ i }) => i.uuid)
          .sort(),
      ).toEqual([first[0]!.uuid, second.uuid].sort());
      // Still exactly one waiting a while later: nothing gave the held instances out again.
      await new Promise((r) => setTimeout(r, 3000));
      expect(await phases()).toEqual(['Pending', 'Running']);
      expect(((await client.get(podPath(NS, waiting)))['spec'] as { nodeName?: string }).nodeName).toBeUndefined();

      // 4. A 1g.20gb pod lands on the instance at a legal placement of its profile.
      await client.create(podPath(NS), migPod('small', '1g.20gb', { command }));
      await expect.poll(() => phaseOf(client, NS, 'small'), { timeout: 30_000 }).toBe('Running');
      const small = (await verified('small')).containers[0]!.cards[0]!;
      const only = instancesOf('1g.20gb');
      expect(only).toHaveLength(1);
      const { c, i } = only[0] as { c: CardInventory; i: { uuid: string } };
      const profile = c.mig?.profiles.find((p) => p.profile === '1g.20gb');
      expect(small.uuid).toBe(i.uuid);
      expect(small.mig?.parent).toBe(c.uuid);
      expect(profile?.placements).toContain(small.mig?.start);
      expect(small.mig?.size).toBe(profile?.memorySlices);
      // What the pod carries is the contract's reading of the same token.
      const pod = (await client.get(podPath(NS, 'small'))) as KubeObj;
      const token = (pod['metadata'] as { annotations: Record<string, string> }).annotations[
        vcudaAnnotations.assignment
      ]!;
      expect(peekAssignment(token)?.containers[0]?.cards[0]).toEqual(small);

      // 5. Two share pods inside the shared 3g.40gb: each granted half of it by its MIG UUID, each
      // program seeing its 4096 MiB and stopped there by libvcuda.
      const sharedNode = await inventoryOf(SHARED_NODE);
      const sharedInstance = sharedNode.cards[0]?.mig?.instances.find((i) => i.shared);
      expect(sharedInstance).toMatchObject({ profile: '3g.40gb', placement: { start: 4, size: 4 }, shared: true });
      const greedy = canRunCuda
        ? ['cuda-workload', '--alloc-mib', '6000', '--chunk-mib', '512', '--hold-seconds', '600']
        : ['sleep', '600'];
      for (const name of ['share-a', 'share-b']) await client.create(podPath(NS), sharePod(name, greedy));
      for (const name of ['share-a', 'share-b']) {
        await expect.poll(() => phaseOf(client, NS, name), { timeout: 30_000 }).not.toBe('Pending');
        const grant = (await verified(name, SHARED_NODE)).containers[0]!.cards;
        expect(grant).toEqual([{ uuid: sharedInstance!.uuid, core: 50, memoryBytes: 4096 * 2 ** 20 }]);
        if (canRunCuda) {
          const log = async () => (await client.getText(`${podPath(NS, name)}/log?container=main`)).text;
          await expect.poll(log, { timeout: 15_000 }).toContain('result=out-of-memory');
          expect(await log()).toContain('total_mib=4096');
          expect(Number(/allocated_mib=(\d+)/.exec(await log())?.[1])).toBeLessThanOrEqual(4096);
        }
      }

      // 6. A second 1g.20gb: the static one is held, so the instance is cut on node h100-dynamic's
      // card, kept for dynamic MIG, at a legal placement its signed grant names; the node agent
      // makes it (its inventory, read from the fake driver, shows it) and destroys it with the pod.
      const dynamicCard = (await inventoryOf(DYNAMIC_NODE)).cards[0]!;
      expect(dynamicCard.mig).toMatchObject({ dynamic: true, instances: [] });
      await client.create(podPath(NS), migPod('small-dyn', '1g.20gb', { command, tolerations: [DYNAMIC_TOLERATION] }));
      await expect.poll(() => phaseOf(client, NS, 'small-dyn'), { timeout: 30_000 }).toBe('Running');
      const cut = (await verified('small-dyn', DYNAMIC_NODE)).containers[0]!.cards[0]!;
      const legal = dynamicCard.mig?.profiles.find((p) => p.profile === '1g.20gb')?.placements ?? [];
      expect(cut.mig).toMatchObject({ parent: dynamicCard.uuid, profile: '1g.20gb', dynamic: true, size: 2 });
      expect(legal).toContain(cut.mig?.start);
      const dynamicInstances = async () =>
        ((await inventoryOf(DYNAMIC_NODE)).cards[0]?.mig?.instances ?? []).map(
          (i) => `${i.profile}@${i.placement.start}`,
        );
      await expect.poll(dynamicInstances, { timeout: 15_000 }).toEqual([`1g.20gb@${cut.mig?.start}`]);
      if (canRunCuda) {
        const made = (await inventoryOf(DYNAMIC_NODE)).cards[0]!.mig!.instances[0]!;
        await expect
          .poll(async () => (await client.getText(`${podPath(NS, 'small-dyn')}/log?container=main`)).text, {
            timeout: 15_000,
          })
          .toContain(`total_mib=${made.memoryMiB}`);
      }
      await client.delete(podPath(NS, 'small-dyn'));
      await expect.poll(dynamicInstances, { timeout: 30_000 }).toEqual([]);
    } finally {
      child.kill('SIGINT');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await exited).toBe(0);
  }, 240_000);
});
