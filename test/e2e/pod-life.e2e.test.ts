/**
 * A pod's whole life in the simulated cluster, through every real component: admission webhook
 * over HTTPS, scheduler + extender (over TLS with the scheduler's client certificate), ledger, node agent over the kubelet's gRPC, libvcuda.so over
 * the fake driver. One cluster for the file; each test removes its pods.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../../db/connect.js';
import { expandNodes, parseClusterSpec } from '../../sim/cluster-spec.js';
import { KubeApiError, podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { inThisProcess } from '../../sim/node/local-node.js';
import { postTls } from '../support/control-plane/tls-request.js';
import { buildWorkloads, gpuPod, liveRows, phaseOf } from './e2e-helpers.js';

const NS = 'e2e';

describe('a pod through the simulated cluster', () => {
  let lc: LocalCluster;
  let canRunCuda = false;

  beforeAll(async () => {
    canRunCuda = buildWorkloads();
    lc = await startLocalCluster({
      cluster: parseClusterSpec({ name: 'e2e', nodes: [{ namePrefix: 'node', count: 1, cards: 2, memoryMiB: 16384 }] }),
      logLevel: 'silent',
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  const removeAll = async () => {
    for (const p of (await lc.client.list(podPath(NS))).items)
      await lc.client.delete(podPath(NS, p.metadata.name)).catch(() => {});
    await expect.poll(async () => (await lc.client.list(podPath(NS))).items.length, { timeout: 15_000 }).toBe(0);
  };

  it('refuses a bad pod at admission with the webhook message, as kubectl shows it', async () => {
    const err = await lc.client.create(podPath(NS), gpuPod('bad', 150, 1024)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    // kube-apiserver passes the webhook's own 4xx code through.
    expect((err as KubeApiError).code).toBeGreaterThanOrEqual(400);
    expect((err as KubeApiError).code).toBeLessThan(500);
    expect((err as KubeApiError).message).toMatch(/^admission webhook "[^"]+" denied the request: /);
    expect((err as KubeApiError).message).toContain('spec.containers[0].resources.limits["nvidia.com/vcuda-core"]');
    expect((await lc.client.list(podPath(NS))).items).toEqual([]);
    // The API server presents the webhook token local mode gave it: its review leaves an Event.
    const reasons = async () =>
      (await lc.client.list(`/api/v1/namespaces/${NS}/events`)).items.map((e) => (e as { reason?: string }).reason);
    await expect.poll(reasons, { timeout: 10_000 }).toContain('VcudaAdmissionRefused');
  }, 90_000);

  it('lets no one but the scheduler bind: an anonymous bind on the Service gets 401 and changes nothing', async () => {
    // A pending pod the vcuda scheduler cannot place (no card has 20 GiB), so only a forged bind could move it.
    const created = await lc.client.create(podPath(NS), gpuPod('waiting', 30, 20_480));
    const bind = { PodName: 'waiting', PodNamespace: NS, PodUID: created.metadata.uid, Node: 'node-0' };
    const plain = await fetch(`${lc.url}/scheduler/bind`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(bind),
    });
    expect(plain.status).toBe(401);
    // The extender port, trusted as the scheduler trusts it, but without the scheduler's certificate.
    const secret = await lc.client.get('/api/v1/namespaces/vcuda-system/secrets/vcuda-extender-tls');
    const caPem = Buffer.from((secret['data'] as Record<string, string>)['ca.crt'] as string, 'base64').toString();
    const tls = await postTls(`${lc.extenderUrl}/scheduler/bind`, bind, {
      caPem,
      servername: 'vcuda-control-plane.vcuda-system.svc',
    });
    expect(tls.status).toBe(401);
    const pod = await lc.client.get(podPath(NS, 'waiting'));
    expect((pod.spec as { nodeName?: string }).nodeName).toBeUndefined();
    expect(await liveRows(lc.db, created.metadata.uid)).toEqual([]);
    await removeAll();
  }, 90_000);

  it('admits, schedules, reserves and allocates a good pod; deletion releases ledger and card', async () => {
    const created = await lc.client.create(podPath(NS), gpuPod('share', 60, 4096));
    // Admission defaulted the hard limit; the webhook sent the vcuda pod to the vcuda scheduler.
    expect(created.metadata.annotations?.['nvidia.com/vcuda-core-limit']).toBe('60');
    await expect.poll(() => phaseOf(lc.client, NS, 'share'), { timeout: 20_000 }).toBe('Running');
    const pod = await lc.client.get(podPath(NS, 'share'));
    expect((pod.spec as { nodeName: string }).nodeName).toBe('node-0');
    expect(pod.metadata.annotations?.['vcuda.io/assignment']).toBeTruthy();
    await expect
      .poll(async () => (await lc.client.get(podPath(NS, 'share'))).metadata.annotations?.['vcuda.io/allocated-at'])
      .toBeTruthy();
    const rows = await liveRows(lc.db, pod.metadata.uid);
    expect(rows.map((r) => ({ core: r.core, memoryMiB: r.memoryMiB, node: r.node }))).toEqual([
      { core: 60, memoryMiB: 4096, node: 'node-0' },
    ]);
    const card = rows[0]!.cardUuid;
    // The scheduler's word for the node, the node agent's for the cards.
    await expect
      .poll(async () => (await lc.client.list(`/api/v1/namespaces/${NS}/events`)).items.map((e) => e['reason']))
      .toEqual(expect.arrayContaining(['Scheduled', 'VcudaAllocated']));

    await lc.client.delete(podPath(NS, 'share'));
    await expect.poll(() => phaseOf(lc.client, NS, 'share'), { timeout: 15_000 }).toBe('Gone');
    await expect.poll(async () => (await liveRows(lc.db, pod.metadata.uid)).length, { timeout: 15_000 }).toBe(0);
    // The card is whole again: a pod asking all of it lands there.
    await lc.client.create(
      podPath(NS),
      gpuPod('whole', 100, undefined, { annotations: { 'nvidia.com/vcuda-gpu-uuid-include': card } }),
    );
    await expect.poll(() => phaseOf(lc.client, NS, 'whole'), { timeout: 20_000 }).toBe('Running');
    await removeAll();
  }, 90_000);

  it("takes usage samples only from the node agents, each of its own node's pods, counted once", async () => {
    await lc.client.create(podPath(NS), gpuPod('metered', 40, 2048));
    await expect.poll(() => phaseOf(lc.client, NS, 'metered'), { timeout: 20_000 }).toBe('Running');
    const pod = await lc.client.get(podPath(NS, 'metered'));
    const card = (await liveRows(lc.db, pod.metadata.uid))[0]!.cardUuid;
    const sample = {
      podUid: pod.metadata.uid,
      namespace: NS,
      pod: 'metered',
      container: 'main',
      cardUuid: card,
      memoryUsedBytes: 1024 ** 3,
      memoryLimitBytes: 2 * 1024 ** 3,
      coreRequest: 40,
      coreLimit: 40,
      // A share the node agent's own reports of this pod never carry: the test counts only its rows.
      smShare: 0.3517,
    };
    const at = new Date().toISOString();
    const report = (token?: string, samples: unknown[] = [sample]) =>
      fetch(`${lc.url}/api/v1/usage`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ node: 'node-0', at, periodS: 5, samples }),
      });
    const samples = async () =>
      rowsOf<{ n: number }>(
        await lc.db.execute(
          sql`select count(*)::int as n from usage_samples where pod_uid = ${sample.podUid} and abs(sm_pct - 35.17) < 0.001`,
        ),
      )[0]?.n ?? 0;
    // The control plane's own account is valid, but it is not a node agent; no token is no caller.
    const other = await report(lc.apiAccess.controlPlaneToken);
    expect(other.status).toBe(403);
    expect(((await other.json()) as { error: { message: string } }).error.message).toContain(
      'system:serviceaccount:vcuda-system:vcuda-control-plane may not do this',
    );
    expect((await report()).status).toBe(401);
    expect((await report('forged')).status).toBe(401);
    // A card the pod was not granted is not the agent's to report.
    expect(
      (await report(lc.apiAccess.nodeAgentTokens['node-0'], [{ ...sample, cardUuid: 'GPU-not-granted' }])).status,
    ).toBe(403);
    expect(await samples()).toBe(0);
    // The node agent reports this pod too: its period may overlap the test's (then the test's adds
    // nothing). Whatever the overlap, the three identical posts count at most once, all of it here.
    const recorded: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await report(lc.apiAccess.nodeAgentTokens['node-0']);
      expect(res.status).toBe(200);
      recorded.push(((await res.json()) as { recorded: number }).recorded);
    }
    expect(recorded[0]).toBeLessThanOrEqual(1);
    expect(recorded.slice(1)).toEqual([0, 0]);
    expect(await samples()).toBe(recorded[0]);
    await removeAll();
  }, 60_000);

  it("stops the pod's CUDA program at its memory limit", async (ctx) => {
    if (!canRunCuda) ctx.skip();
    const p = await lc.client.create(
      podPath(NS),
      gpuPod('greedy', 30, 1024, {
        command: ['cuda-workload', '--alloc-mib', '4096', '--chunk-mib', '128'],
        restartPolicy: 'Never',
        // The node's second card: the container must see it as its device 0, as in a real container.
        annotations: { 'nvidia.com/vcuda-gpu-uuid-include': expandNodes(lc.cluster)[0]!.cards[1]!.uuid },
      }),
    );
    await expect.poll(() => phaseOf(lc.client, NS, 'greedy'), { timeout: 20_000 }).toBe('Failed');
    const status = (await lc.client.get(podPath(NS, 'greedy'))).status as {
      containerStatuses: { state: { terminated: { exitCode: number } } }[];
    };
    expect(status.containerStatuses[0]!.state.terminated.exitCode).toBe(2);
    // Read through the API server's pods/log, as `kubectl logs` does.
    const { text: log } = await lc.client.getText(`${podPath(NS, 'greedy')}/log?container=main`);
    expect(log).toBe(
      readFileSync(join(lc.workDir, 'nodes', 'node-0', 'kubelet', 'logs', `${p.metadata.uid}-main.log`), 'utf8'),
    );
    expect(log).toContain('total_mib=1024');
    expect(log).toContain('result=out-of-memory');
    const allocated = Number(/allocated_mib=(\d+)/.exec(log)![1]);
    expect(allocated).toBeLessThanOrEqual(1024);
    // A finished pod gives its cards back.
    await expect.poll(async () => (await liveRows(lc.db, p.metadata.uid)).length, { timeout: 15_000 }).toBe(0);
    await removeAll();
  }, 90_000);

  it('serves stock kubectl: get, create -f (refused with the webhook message), apply -f, describe, events, delete', async (ctx) => {
    if (spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status !== 0) ctx.skip();
    // Asynchronous: the API server answering kubectl runs in this very process.
    const kubectl = (...args: string[]) =>
      new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
        execFile(
          'kubectl',
          ['--kubeconfig', lc.kubeconfigPath, '-n', NS, ...args],
          { timeout: 20_000 },
          (err, stdout, stderr) =>
            resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        );
      });
    expect((await kubectl('get', 'nodes')).stdout).toMatch(/node-0\s+Ready/);
    const bad = join(lc.workDir, 'bad.yaml');
    writeFileSync(bad, JSON.stringify(gpuPod('kubectl-bad', 30)));
    const refused = await kubectl('create', '-f', bad);
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('admission webhook');
    expect(refused.stderr).toContain('must state nvidia.com/vcuda-memory');
    const good = join(lc.workDir, 'good.yaml');
    writeFileSync(good, JSON.stringify(gpuPod('kubectl-good', 20, 2048)));
    expect((await kubectl('apply', '-f', good)).status).toBe(0);
    await expect.poll(() => phaseOf(lc.client, NS, 'kubectl-good'), { timeout: 20_000 }).toBe('Running');
    expect((await kubectl('get', 'pods', '-o', 'wide')).stdout).toMatch(/kubectl-good\s+1\/1\s+Running.*node-0/);
    expect((await kubectl('describe', 'pod', 'kubectl-good')).stdout).toContain('vcuda.io/assignment');
    expect((await kubectl('get', 'events')).stdout).toContain('VcudaAllocated');
    expect((await kubectl('delete', 'pod', 'kubectl-good', '--timeout=20s')).status).toBe(0);
    expect(await phaseOf(lc.client, NS, 'kubectl-good')).toBe('Gone');
  }, 90_000);

  it('keeps running pods and serves new ones across a node-agent restart', async () => {
    await lc.client.create(podPath(NS), gpuPod('before', 20, 1024));
    await expect.poll(() => phaseOf(lc.client, NS, 'before'), { timeout: 20_000 }).toBe('Running');
    const node = inThisProcess(lc.nodes[0]!);
    await node.restartAgent();
    await expect.poll(() => node.agent()?.allocator.records().length ?? 0, { timeout: 10_000 }).toBeGreaterThan(0);
    await lc.client.create(podPath(NS), gpuPod('after', 20, 1024));
    await expect.poll(() => phaseOf(lc.client, NS, 'after'), { timeout: 20_000 }).toBe('Running');
    expect(await phaseOf(lc.client, NS, 'before')).toBe('Running');
    await removeAll();
  }, 90_000);
});
