/**
 * Usage in the simulated cluster, through every real piece: a pod's CUDA program launches kernels
 * through libvcuda over the fake driver, the node agent samples per-process utilization from the
 * node's fake NVML, maps host pids to the container through the kubelet's cgroup view, writes the
 * shares into the container's region and reports them with its node-bound token; the control
 * plane's reports then show GPU-hours used for the busy pod and the idle pod as idle.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { buildWorkloads, gpuPod, phaseOf } from './e2e-helpers.js';

const BUSY_NS = 'usage-busy';
const IDLE_NS = 'usage-idle';

type Report = { rows: Record<string, string | number | null>[] };

describe('usage from simulated containers', () => {
  let lc: LocalCluster;
  let canRunCuda = false;

  beforeAll(async () => {
    canRunCuda = buildWorkloads();
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'usage',
        nodes: [{ namePrefix: 'node', count: 1, cards: 2, memoryMiB: 16384 }],
      }),
      logLevel: 'silent',
      schedulerBackoffMs: { initial: 200, max: 1000 },
      usageReportMs: 1000,
    });
    for (const name of [BUSY_NS, IDLE_NS]) await lc.client.create('/api/v1/namespaces', { metadata: { name } });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  const report = async (name: string, query: string): Promise<Report> => {
    const res = await fetch(`${lc.url}/api/v1/reports/${name}?${query}`);
    expect(res.status).toBe(200);
    return (await res.json()) as Report;
  };

  it('reports GPU-hours used for a busy pod and lists an idle pod as idle', async (ctx) => {
    if (!canRunCuda) ctx.skip();
    const workload = (busyPercent: number) => ({
      command: ['cuda-workload', '--alloc-mib', '512', '--hold-seconds', '600', '--busy-percent', String(busyPercent)],
    });
    await lc.client.create(podPath(BUSY_NS), gpuPod('busy', 50, 2048, workload(40)));
    await lc.client.create(podPath(IDLE_NS), gpuPod('idle', 30, 2048, workload(0)));
    for (const [ns, name] of [
      [BUSY_NS, 'busy'],
      [IDLE_NS, 'idle'],
    ] as const) {
      await expect.poll(() => phaseOf(lc.client, ns, name), { timeout: 30_000 }).toBe('Running');
    }

    const usedHours = async (ns: string) =>
      (await report('gpu-hours', 'groupBy=namespace')).rows
        .filter((r) => r['namespace'] === ns)
        .reduce((sum, r) => sum + Number(r['usedGpuHours'] ?? 0), 0);
    await expect.poll(() => usedHours(BUSY_NS), { timeout: 30_000, interval: 1000 }).toBeGreaterThan(0);

    // Held longer than 6 s, mean SM share below 5 %: only the pod that launches nothing.
    const idlePods = async () =>
      (await report('idle', 'idleForMinutes=0.1&idleBelowPct=5')).rows.map((r) => `${r['namespace']}/${r['pod']}`);
    await expect.poll(idlePods, { timeout: 30_000, interval: 1000 }).toContain(`${IDLE_NS}/idle`);
    expect(await idlePods()).not.toContain(`${BUSY_NS}/busy`);
    expect(await usedHours(IDLE_NS)).toBe(0);

    // The busy pod's mean share is its duty cycle (40 %, under its 50 % limit), as the ledger saw it.
    // (Every pod with samples over the last 6 s is below 100 %; the busy one may not be there yet.)
    const busyShare = async () =>
      (await report('idle', 'idleForMinutes=0.1&idleBelowPct=100')).rows.find((r) => r['pod'] === 'busy')?.[
        'meanSmPct'
      ];
    await expect.poll(busyShare, { timeout: 30_000 }).toBeDefined();
    expect(Number(await busyShare())).toBeGreaterThan(20);
    expect(Number(await busyShare())).toBeLessThan(60);
  }, 120_000);
});
