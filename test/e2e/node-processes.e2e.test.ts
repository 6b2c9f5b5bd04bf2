/**
 * Nodes in processes of their own (`nodeProcesses: true`), as a real cluster's kubelets and
 * node-agent pods are: pods still get their limits enforced, the agent restarts through the
 * process boundary, a bad node description is refused at that boundary, and no node process
 * outlives its cluster.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer } from '../../sim/apiserver/api-server.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { type LocalCluster, NATIVE_BUILD_DIR, startLocalCluster } from '../../sim/local-cluster.js';
import { startNodeProcess } from '../../sim/node/node-process.js';
import { processAlive } from '../support/process.js';
import { buildWorkloads, gpuPod, phaseOf } from './e2e-helpers.js';

const NS = 'procs';
const cluster = parseClusterSpec({
  name: 'procs',
  nodes: [{ namePrefix: 'node', count: 2, cards: 2, memoryMiB: 16384 }],
});

describe('a local cluster whose nodes run in their own processes', () => {
  let lc: LocalCluster;
  let canRunCuda = false;

  beforeAll(async () => {
    canRunCuda = buildWorkloads();
    lc = await startLocalCluster({
      cluster,
      logLevel: 'silent',
      nodeProcesses: true,
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  const pids = () => lc.nodes.map((n) => ('pid' in n ? n.pid : process.pid));

  it('runs every node apart from this process', () => {
    expect(pids().every((pid) => pid !== process.pid && processAlive(pid))).toBe(true);
  });

  it("enforces a pod's memory limit on a node in its own process", async (ctx) => {
    if (!canRunCuda) ctx.skip();
    const command = ['cuda-workload', '--alloc-mib', '4096', '--chunk-mib', '128'];
    await lc.client.create(podPath(NS), gpuPod('greedy', 30, 1024, { command, restartPolicy: 'Never' }));
    await expect.poll(() => phaseOf(lc.client, NS, 'greedy'), { timeout: 30_000 }).toBe('Failed');
    const { text: log } = await lc.client.getText(`${podPath(NS, 'greedy')}/log?container=main`);
    expect(log).toContain('total_mib=1024');
    expect(log).toContain('result=out-of-memory');
    await lc.client.delete(podPath(NS, 'greedy'));
  }, 60_000);

  it('restarts a node agent through the process boundary and serves pods after it', async () => {
    for (const n of lc.nodes) await n.restartAgent();
    await lc.client.create(podPath(NS), gpuPod('after-restart', 20, 1024));
    await expect.poll(() => phaseOf(lc.client, NS, 'after-restart'), { timeout: 30_000 }).toBe('Running');
    await lc.client.delete(podPath(NS, 'after-restart'));
  }, 60_000);

  it('leaves no node process behind when the cluster closes', async () => {
    const nodePids = pids();
    await lc.close();
    expect(nodePids.filter(processAlive)).toEqual([]);
  }, 60_000);
});

describe('a node process', () => {
  const spec = (dir: string) => ({
    cluster,
    nodeName: 'node-0',
    root: join(dir, 'node-0'),
    apiUrl: 'http://127.0.0.1:9',
    domain: 'nvidia.com',
    nativeBuildDir: NATIVE_BUILD_DIR,
    logLevel: 'silent' as const,
  });

  it('refuses a description that fails validation, naming the field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-node-proc-'));
    try {
      const bad = { ...spec(dir), apiUrl: 'not a url' };
      await expect(startNodeProcess(bad)).rejects.toThrow(
        /node node-0: did not start: invalid node description.*apiUrl/s,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a node its cluster does not have', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-node-proc-'));
    try {
      await expect(startNodeProcess({ ...spec(dir), nodeName: 'node-7' })).rejects.toThrow(
        'node node-7: did not start: cluster procs has no node node-7',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits when its parent dies without closing it (kill -9)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-node-proc-'));
    const api = await startApiServer();
    // A parent that starts one node, prints the node's pid and waits; killed, it cannot close the
    // node, which must notice its channel closing.
    const script = `
      import { startNodeProcess } from ${JSON.stringify(new URL('../../sim/node/node-process.ts', import.meta.url).href)};
      const n = await startNodeProcess(${JSON.stringify({ ...spec(dir), apiUrl: api.url })}).catch((e) => { console.log('failed', e.message); process.exit(1); });
      console.log('pid', n.pid);
      setInterval(() => {}, 1000);
    `;
    const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let out = '';
      parent.stdout.on('data', (d) => {
        out += d;
      });
      await expect.poll(() => out, { timeout: 60_000 }).toMatch(/^(pid \d+|failed .*)\n/);
      const nodePid = Number(/^pid (\d+)/.exec(out)?.[1]);
      expect(processAlive(nodePid)).toBe(true);
      parent.kill('SIGKILL');
      await once(parent, 'exit');
      await expect.poll(() => processAlive(nodePid), { timeout: 20_000 }).toBe(false);
    } finally {
      parent.kill('SIGKILL');
      await api.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
