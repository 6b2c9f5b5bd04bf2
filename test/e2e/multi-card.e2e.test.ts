/**
 * A container granted two whole cards, through every real component: the scheduler places
 * `vcuda-core: 200`, the node agent's Allocate names both cards in NVIDIA_VISIBLE_DEVICES, and the
 * container's CUDA program (under libvcuda, over the fake driver describing the whole node) sees
 * exactly those two cards, in that order, with their own UUIDs and limits, and is stopped at the
 * memory limit on each of them, the second included.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expandNodes, parseClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { buildWorkloads, gpuPod, liveRows, phaseOf } from './e2e-helpers.js';

const NS = 'multi';
const LIMIT_MIB = 1024;
/** Reports what a CUDA program enumerates and allocates (native/test/fake_visible_client.c). */
const CLIENT = resolve(import.meta.dirname, '../../native/build/test/fake_visible_client');

/** `key=value` lines of a container log. */
function keyValues(log: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of log.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) out.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return out;
}

describe('a container with two cards', () => {
  let lc: LocalCluster;
  let canRunCuda = false;

  beforeAll(async () => {
    canRunCuda = buildWorkloads() && existsSync(CLIENT);
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'e2e-multi',
        nodes: [{ namePrefix: 'node', count: 1, cards: 4, memoryMiB: 8192 }],
      }),
      logLevel: 'silent',
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  it('sees exactly its two cards with their UUIDs and limits, and meets the limit on the second card too', async (ctx) => {
    if (!canRunCuda) ctx.skip();
    const cards = expandNodes(lc.cluster)[0]!.cards;
    // Two cards that are not the node's first: what a per-container numbering would get wrong.
    const granted = [cards[2]!.uuid, cards[3]!.uuid];
    const script = [
      'echo visible=$NVIDIA_VISIBLE_DEVICES',
      `${CLIENT} list`,
      `${CLIENT} alloc 1 4096 128 0`,
      `${CLIENT} alloc 0 4096 128 0`,
    ].join('; ');
    const p = await lc.client.create(
      podPath(NS),
      gpuPod('pair', 200, LIMIT_MIB, {
        command: ['sh', '-c', script],
        restartPolicy: 'Never',
        annotations: { 'nvidia.com/vcuda-gpu-uuid-include': granted.join(',') },
      }),
    );
    await expect.poll(() => phaseOf(lc.client, NS, 'pair'), { timeout: 30_000 }).toBe('Failed');
    const log = readFileSync(
      join(lc.workDir, 'nodes', 'node-0', 'kubelet', 'logs', `${p.metadata.uid}-main.log`),
      'utf8',
    );
    const kv = keyValues(log);

    // The runtime exposed the two cards the scheduler placed, in the order Allocate named them.
    const visible = (kv.get('visible') ?? '').split(',');
    expect([...visible].sort()).toEqual([...granted].sort());
    // CUDA and NVML enumerate exactly those cards, in that order, each with its own UUID.
    expect(kv.get('cuda.count'), log).toBe('2');
    expect([kv.get('cuda.0.uuid'), kv.get('cuda.1.uuid')]).toEqual(visible);
    expect(kv.get('nvml.count')).toBe('2');
    expect([kv.get('nvml.0.uuid'), kv.get('nvml.1.uuid')]).toEqual(visible);
    // Every card's view is the pod's limit, not the card's 8 GiB.
    for (const i of [0, 1]) {
      expect(kv.get(`cuda.${i}.total_mib`)).toBe(String(LIMIT_MIB));
      expect(kv.get(`nvml.${i}.total_mib`)).toBe(String(LIMIT_MIB));
    }
    // Stopped at the limit on each card. Some memory was granted on each (a card missing from the
    // limit file would be refused outright: 0 MiB), and never more than the limit.
    for (const i of [1, 0]) {
      expect(kv.get(`alloc.${i}.result`), log).toBe('out-of-memory');
      const allocated = Number(kv.get(`alloc.${i}.allocated_mib`));
      expect(allocated).toBeGreaterThan(0);
      expect(allocated).toBeLessThanOrEqual(LIMIT_MIB);
    }
    expect(log).not.toContain('is not in the limit file');
    // A finished pod gives both cards back.
    await expect.poll(async () => (await liveRows(lc.db, p.metadata.uid)).length, { timeout: 15_000 }).toBe(0);
  }, 120_000);
});
