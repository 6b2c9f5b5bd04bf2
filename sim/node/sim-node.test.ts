/**
 * The node's fake-driver env: one description of the whole node, and a container's visible cards
 * from NVIDIA_VISIBLE_DEVICES. Checked against the fake driver itself: a process given that env
 * enumerates exactly the cluster description's cards, with the UUIDs, PCI ids and memory the node
 * agent publishes for them.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expandNodes, parseClusterSpec } from '../cluster-spec.js';
import { visibleDevicesOf } from '../kubelet/container-runtime.js';
import { openNodeNvml } from './node-nvml.js';
import { containerBaseEnv, nodeDriverEnv, visibleDevicesEnv } from './sim-node.js';

const build = resolve(import.meta.dirname, '../../native/build');
const client = join(build, 'test', 'fake_visible_client');
const workload = resolve(import.meta.dirname, '../.vcuda/build/cuda-workload');
const tmp = mkdtempSync(join(tmpdir(), 'vcuda-sim-node-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const [nodeA, nodeB] = expandNodes(
  parseClusterSpec({ nodes: [{ namePrefix: 'gpu', count: 2, cards: 4, memoryMiB: 4096, model: 'NVIDIA H100' }] }),
);

/** A fresh node root (the state file lives there, as under the simulated node's root). */
function nodeRoot(name: string): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function enumerate(env: Record<string, string>): Map<string, string> {
  const run = spawnSync(client, ['list'], { env, encoding: 'utf8', timeout: 20_000 });
  return new Map(run.stdout.split('\n').map((l) => l.split('=') as [string, string]));
}

describe('fake-driver env of a simulated node', () => {
  it('describes the whole node: every card, one seed and one state file per node', () => {
    const a = nodeDriverEnv(nodeA!, join(tmp, 'a'));
    expect(a).toMatchObject({ FAKEGPU_DEVICES: '4096,4096,4096,4096', FAKEGPU_NAME: 'NVIDIA H100' });
    expect(a['FAKEGPU_UUID_SEED']).not.toBe(nodeDriverEnv(nodeB!, join(tmp, 'b'))['FAKEGPU_UUID_SEED']);
    expect(new Set([...nodeA!.cards, ...nodeB!.cards].map((c) => c.uuid)).size).toBe(8);
  });

  it.each([
    ['UUIDs in Allocate order', { NVIDIA_VISIBLE_DEVICES: 'GPU-b,GPU-a' }, ['GPU-b', 'GPU-a']],
    ['spaces and empty entries dropped', { NVIDIA_VISIBLE_DEVICES: ' GPU-a , ,GPU-c' }, ['GPU-a', 'GPU-c']],
    ['unset: nothing', {}, []],
    ['none passes through', { NVIDIA_VISIBLE_DEVICES: 'none' }, ['none']],
  ])('reads NVIDIA_VISIBLE_DEVICES: %s', (_name, env, want) => {
    expect(visibleDevicesOf(env)).toEqual(want);
  });

  it('shows a container without cards no device', () => {
    expect(visibleDevicesEnv(nodeA!, tmp, [])['FAKEGPU_VISIBLE_DEVICES']).toBe('none');
  });

  it.skipIf(!existsSync(client))(
    "makes the fake driver enumerate exactly the granted cards, in order, as the node's",
    () => {
      const cards = nodeA!.cards;
      const env = {
        ...containerBaseEnv(nodeA!, build),
        ...visibleDevicesEnv(nodeA!, nodeRoot('enum'), [cards[3]!.uuid, cards[1]!.uuid]),
      };
      const kv = enumerate(env);
      expect(kv.get('cuda.count')).toBe('2');
      expect([kv.get('cuda.0.uuid'), kv.get('cuda.1.uuid')]).toEqual([cards[3]!.uuid, cards[1]!.uuid]);
      expect([kv.get('nvml.0.uuid'), kv.get('nvml.1.uuid')]).toEqual([cards[3]!.uuid, cards[1]!.uuid]);
      expect(kv.get('cuda.0.total_mib')).toBe('4096');
      // CUDA prints a 4-digit domain, lower case; NVML (what the node agent reads) 8 digits.
      expect(`0000${kv.get('cuda.0.pci')}`.toUpperCase()).toBe(cards[3]!.pciBusId);
      expect(kv.get('nvml.0.minor')).toBe(String(cards[3]!.index));
    },
  );

  it.skipIf(!existsSync(client))("refuses another node's card: no device at all", () => {
    const env = {
      ...containerBaseEnv(nodeA!, build),
      ...visibleDevicesEnv(nodeA!, nodeRoot('other'), [nodeB!.cards[0]!.uuid]),
    };
    const kv = enumerate(env);
    expect(kv.get('cuda.count')).toBe('0');
    expect(kv.get('nvml.count')).toBe('0');
  });
});

describe.skipIf(!existsSync(workload) || !existsSync(join(build, 'fake', 'libnvidia-ml.so.1')))(
  "a node's fake NVML in the agents' process",
  () => {
    it("reports the busy time of that node's container process only, on the card it ran on", async () => {
      const [rootA, rootB] = [nodeRoot('nvml-a'), nodeRoot('nvml-b')];
      const nvmlA = openNodeNvml(nodeA!, rootA, build, nodeDriverEnv(nodeA!, rootA))!;
      const nvmlB = openNodeNvml(nodeB!, rootB, build, nodeDriverEnv(nodeB!, rootB))!;
      const since = Date.now() * 1000;
      const env = { ...containerBaseEnv(nodeA!, build), ...visibleDevicesEnv(nodeA!, rootA, [nodeA!.cards[2]!.uuid]) };
      const busy = spawn(workload, ['--hold-seconds', '2', '--busy-percent', '50'], { env, stdio: 'ignore' });
      try {
        await expect
          .poll(() => nvmlA.processUtilization(2, since).filter((s) => s.pid === busy.pid).length, { timeout: 5000 })
          .toBeGreaterThan(2);
        const samples = nvmlA.processUtilization(2, since).filter((s) => s.pid === busy.pid);
        const mean = samples.reduce((a, s) => a + s.smPercent, 0) / samples.length;
        expect(mean).toBeGreaterThan(30);
        expect(mean).toBeLessThan(70);
        expect(nvmlA.processUtilization(0, since)).toEqual([]);
        for (let i = 0; i < 4; i++) expect(nvmlB.processUtilization(i, since)).toEqual([]);
      } finally {
        busy.kill();
        nvmlA.close();
        nvmlB.close();
      }
    });
  },
);
