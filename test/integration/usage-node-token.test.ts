/**
 * The node a usage writer speaks for, taken from its token as a real kube-apiserver (v1.32, from
 * ../shared/kubernetes-1.32) reviews it: a service account token bound to the node agent's pod
 * carries the pod's node (`authentication.kubernetes.io/node-name`), one bound to nothing does
 * not. The simulator's TokenReview answers the same way (sim/local-cluster.ts), this proves the
 * shape against the real thing. Skipped, and says so, where that control plane is not available.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedAuthenticator, requireCaller, tokenReview } from '../../control-plane/api/caller-auth.js';
import { usageRoutes } from '../../control-plane/api/usage-routes.js';
import { apiRoutes, createApp } from '../../control-plane/app.js';
import { assignedPod, cardUuid, grantsAsWritten } from '../support/control-plane/builders.js';

const CLUSTER_SH = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../shared/kubernetes-1.32/cluster.sh');
const available = existsSync(CLUSTER_SH);
if (!available)
  console.warn(`${CLUSTER_SH} is missing: the real API server variant of the usage token test is skipped`);

const NS = 'vcuda-system';
const AGENT = `system:serviceaccount:${NS}:vcuda-node-agent`;
const NOW = new Date('2026-11-22T04:00:00Z');

describe.skipIf(!available)('usage writers against a real kube-apiserver', () => {
  let dir: string;
  let kc: KubeConfig;
  let boundToken: string;
  let unboundToken: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vcuda-k8s-'));
    const started = spawnSync(CLUSTER_SH, ['start', dir], { encoding: 'utf8', timeout: 90_000 });
    const kubeconfig = /^KUBECONFIG=(.+)$/m.exec(started.stdout)?.[1];
    if (started.status !== 0 || !kubeconfig) throw new Error(`cluster.sh start failed: ${started.stderr}`);
    kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'vcuda-node-agent' } } });
    await core.createNode({ body: { metadata: { name: 'gpu-node-a' } } });
    const agentPod = await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name: 'vcuda-node-agent-x7k2p' },
        spec: {
          serviceAccountName: 'vcuda-node-agent',
          nodeName: 'gpu-node-a',
          containers: [{ name: 'agent', image: 'vcuda/node-agent' }],
        },
      },
    });
    const tokenFor = async (bound: boolean) =>
      (
        await core.createNamespacedServiceAccountToken({
          name: 'vcuda-node-agent',
          namespace: NS,
          body: {
            spec: {
              audiences: [],
              expirationSeconds: 600,
              ...(bound
                ? {
                    boundObjectRef: {
                      kind: 'Pod',
                      apiVersion: 'v1',
                      name: 'vcuda-node-agent-x7k2p',
                      uid: agentPod.metadata?.uid,
                    },
                  }
                : {}),
            },
          },
        })
      ).status?.token as string;
    boundToken = await tokenFor(true);
    unboundToken = await tokenFor(false);
  }, 120_000);

  afterAll(() => {
    if (!dir) return;
    const stopped = spawnSync(CLUSTER_SH, ['stop', dir], { encoding: 'utf8', timeout: 30_000 });
    if (stopped.status !== 0) console.warn(`cluster.sh stop ${dir} failed: ${stopped.stderr}`);
    rmSync(dir, { recursive: true, force: true });
  });

  it("lets a pod-bound token report its node's pods only, and a token bound to nothing none", async () => {
    const pods = [
      assignedPod('infer', 'gpu-node-a', [{ name: 'model', core: 30, memoryMiB: 1024, cards: [0] }]),
      assignedPod('train', 'gpu-node-b', [{ name: 'main', core: 50, memoryMiB: 1024, cards: [0] }]),
    ];
    const written: number[] = [];
    const guard = requireCaller(cachedAuthenticator(tokenReview(kc)), [AGENT], 'POST /api/v1/usage');
    const app = createApp({
      api: apiRoutes(
        usageRoutes({
          clusterName: 'c1',
          usage: {
            recordUsage: async (s) => {
              written.push(s.length);
              return { recorded: s.length, duplicate: 0, outsideAllocation: 0 };
            },
          },
          guard,
          pods: (ns, name) => pods.find((p) => p.metadata?.namespace === ns && p.metadata?.name === name),
          grants: grantsAsWritten,
          clock: () => NOW,
        }),
      ),
    });
    const sampleOf = (pod: string, container: string, node: string) => ({
      podUid: `uid-${pod}`,
      namespace: 'default',
      pod,
      container,
      cardUuid: cardUuid(node, 0),
      memoryUsedBytes: 1,
      memoryLimitBytes: 2,
      coreRequest: 30,
      coreLimit: 30,
      smShare: 0.5,
    });
    const report = (token: string, node: string, samples: unknown[]) =>
      app.request('/api/v1/usage', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ node, at: '2026-11-22T03:59:50Z', samples }),
      });
    const message = async (res: Response) => ((await res.json()) as { error: { message: string } }).error.message;

    const own = await report(boundToken, 'gpu-node-a', [sampleOf('infer', 'model', 'gpu-node-a')]);
    expect(own.status).toBe(200);
    expect(written).toEqual([1]);
    const other = await report(boundToken, 'gpu-node-b', [sampleOf('train', 'main', 'gpu-node-b')]);
    expect(other.status).toBe(403);
    expect(await message(other)).toMatch(/the caller's token speaks for node gpu-node-a/);
    const unbound = await report(unboundToken, 'gpu-node-a', [sampleOf('infer', 'model', 'gpu-node-a')]);
    expect(unbound.status).toBe(403);
    expect(await message(unbound)).toMatch(/bound to no pod, so it speaks for no node/);
    expect(written).toEqual([1]);
  });
});
