/**
 * Claims from creation to Running on the real control plane v1.36 (`../shared/kubernetes-1.36/`:
 * kube-apiserver, kube-scheduler allocating with consumable capacity, kube-controller-manager
 * making each pod's claim from its template), 4 simulated nodes each with vcuda's real node agent
 * in DRA mode (fake NVML, 8 cards) and the simulated kubelet's DRA manager calling its Prepare:
 * `VCUDA_BENCH_DRA_CLAIMS` (default 100) pods, one share claim each (20 cores, 4 GiB), created
 * together, timed until all run. Beside it, on the same cluster in the same run, the ceiling: as
 * many pods whose claims ask the same of a driver-less DeviceClass, whose devices are a copy of
 * each node's vcuda slice under another driver name and whose kubelet plugin prepares nothing.
 * The ratio is what vcuda's ResourceSlices and Prepare cost a claim's start.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { type DraPluginServer, startDraPluginServer } from '../../node-agent/dra/plugin-server.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import type { RunningSimNode } from '../../sim/node/sim-node.js';
import { startDraSimNodes } from '../support/dra-node-tier.js';
import {
  type RealControlPlane,
  real136SkipReason,
  startRealControlPlane136,
} from '../support/real-control-plane-136.js';
import { atLeast, type Benchmark, type Figure } from './harness.js';

const CLAIMS = Number(process.env.VCUDA_BENCH_DRA_CLAIMS ?? 100);
const WARM_UP = 20;
const NS = 'dra-starts';
const GV = '/apis/resource.k8s.io/v1';
const VCUDA = 'gpu.vcuda.io';
const NOOP = 'noop.vcuda.io';
const SHARE = { cores: '20', memory: '4Gi' };

/** Polls `check` every 100 ms until it holds; fails after `timeoutMs` saying what `explain` finds. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, explain = async () => '') {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`dra-starts: ${what} not reached in ${timeoutMs / 1000} s ${await explain()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const deviceClass = (driver: string) => ({
  metadata: { name: driver },
  spec: { selectors: [{ cel: { expression: `device.driver == "${driver}"` } }] },
});

const template = (driver: string) => ({
  metadata: { name: driver },
  spec: {
    spec: {
      devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: driver, capacity: { requests: SHARE } } }] },
    },
  },
});

const pod = (name: string, driver: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  spec: {
    terminationGracePeriodSeconds: 1,
    resourceClaims: [{ name: 'gpu', resourceClaimTemplateName: driver }],
    containers: [{ name: 'main', image: 'sim', command: ['sleep', '600'], resources: { claims: [{ name: 'gpu' }] } }],
  },
});

const slicesOf = async (client: KubeClient, driver: string) =>
  (await client.list(`${GV}/resourceslices`)).items.filter((s) => (s['spec'] as { driver: string }).driver === driver);

/** The driver-less twin of each node's vcuda slice: the same devices and capacity, another driver. */
async function publishNoopSlices(client: KubeClient): Promise<void> {
  for (const s of await slicesOf(client, VCUDA)) {
    const spec = s['spec'] as { nodeName: string; pool: object; devices: object[] };
    await client.create(`${GV}/resourceslices`, {
      metadata: { name: `${spec.nodeName}-${NOOP}` },
      spec: { driver: NOOP, nodeName: spec.nodeName, pool: spec.pool, devices: spec.devices },
    });
  }
}

/** The noop driver's kubelet plugin on each node: registered with its kubelet, preparing nothing. */
function startNoopPlugins(nodes: RunningSimNode[]): Promise<DraPluginServer[]> {
  const quiet = { info: () => undefined, warn: () => undefined };
  const handler = { prepare: async () => ({ devices: [], error: '' }), unprepare: async () => ({ error: '' }) };
  return Promise.all(
    nodes.map((n) =>
      startDraPluginServer(
        {
          driver: NOOP,
          registryDir: n.kubelet.dra.registryDir,
          pluginDir: join(n.kubelet.dra.pluginsDir, NOOP),
          handler,
        },
        quiet,
      ),
    ),
  );
}

const phaseOf = (p: KubeObj) => (p['status'] as { phase?: string } | undefined)?.phase ?? 'Pending';

/**
 * Creates `count` pods of `driver`'s claims together and returns the seconds until all run;
 * `prepared` (the claims vcuda's agents hold) must then count exactly the vcuda round's claims.
 */
async function round(
  client: KubeClient,
  prepared: () => number,
  driver: string,
  count: number,
  tag: string,
): Promise<number> {
  const t0 = performance.now();
  await Promise.all(Array.from({ length: count }, (_, i) => client.create(podPath(NS), pod(`${tag}-${i}`, driver))));
  const pods = () => client.list(podPath(NS));
  await until(
    `${count} ${driver} pods Running`,
    async () => (await pods()).items.filter((p) => phaseOf(p) === 'Running').length === count,
    300_000,
    async () => {
      const phases = (await pods()).items.map(phaseOf);
      return `(${phases.filter((p) => p === 'Running').length} running of ${phases.length})`;
    },
  );
  const seconds = (performance.now() - t0) / 1000;
  const held = prepared();
  if (held !== (driver === VCUDA ? count : 0)) throw new Error(`${driver} round: vcuda's agents hold ${held} claims`);
  await empty(client);
  return seconds;
}

/** Deletes every pod of the namespace and waits until they and their claims are gone. */
async function empty(client: KubeClient): Promise<void> {
  for (const p of (await client.list(podPath(NS))).items) {
    await client.delete(podPath(NS, p.metadata.name)).catch(() => undefined);
  }
  await until(
    'pods and claims gone',
    async () =>
      (await client.list(podPath(NS))).items.length === 0 &&
      (await client.list(`${GV}/namespaces/${NS}/resourceclaims`)).items.length === 0,
    120_000,
  );
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function measure(plane: RealControlPlane, root: string, log: (l: string) => void): Promise<Figure[]> {
  const { client } = plane;
  const spec = parseClusterSpec({ name: 'dra', nodes: [{ namePrefix: 'node', count: 4, cards: 8, memoryMiB: 81920 }] });
  const nodes = await startDraSimNodes(plane, root, spec, pino({ level: 'silent' }));
  const plugins: DraPluginServer[] = [];
  try {
    await until('4 vcuda ResourceSlices', async () => (await slicesOf(client, VCUDA)).length === 4, 60_000);
    await publishNoopSlices(client);
    plugins.push(...(await startNoopPlugins(nodes)));
    await until(
      'both drivers registered on every kubelet',
      async () => nodes.every((n) => n.kubelet.dra.driverNames().length === 2),
      30_000,
    );
    await client.create('/api/v1/namespaces', { metadata: { name: NS } });
    // Pods are admitted once kube-controller-manager has made the namespace's default ServiceAccount.
    await until(
      'the default ServiceAccount',
      () =>
        client.get(`/api/v1/namespaces/${NS}/serviceaccounts/default`).then(
          () => true,
          () => false,
        ),
      30_000,
    );
    for (const d of [VCUDA, NOOP]) {
      await client.create(`${GV}/deviceclasses`, deviceClass(d));
      await client.create(`${GV}/namespaces/${NS}/resourceclaimtemplates`, template(d));
    }
    const prepared = () => nodes.reduce((n, node) => n + (node.draAgent()?.preparer.prepared().length ?? 0), 0);
    await round(client, prepared, VCUDA, WARM_UP, 'warm-vcuda');
    await round(client, prepared, NOOP, WARM_UP, 'warm-noop');
    const seconds: Record<string, number[]> = { [VCUDA]: [], [NOOP]: [] };
    for (const [i, d] of [NOOP, VCUDA, VCUDA, NOOP].entries()) {
      const s = await round(client, prepared, d, CLAIMS, `r${i}`);
      log(`${d}: ${CLAIMS} claims Running in ${s.toFixed(2)} s`);
      seconds[d]?.push(s);
    }
    return figuresOf(seconds[VCUDA] ?? [], seconds[NOOP] ?? []);
  } finally {
    for (const p of plugins) await p.stop();
    for (const n of nodes) await n.close().catch(() => undefined);
  }
}

function figuresOf(vcuda: number[], noop: number[]): Figure[] {
  const rate = CLAIMS / mean(vcuda);
  const ceiling = CLAIMS / mean(noop);
  const scenario = `${CLAIMS} share claims (20 cores, 4 GiB) from pod templates on 4 nodes of 8 cards, mean of 2 rounds`;
  return [
    { name: 'vcuda_claims_per_s', value: rate, unit: 'claims/s', scenario },
    {
      name: 'noop_driver_claims_per_s',
      value: ceiling,
      unit: 'claims/s',
      scenario: `${CLAIMS} claims of a driver-less DeviceClass (same devices, Prepare does nothing), same run`,
    },
    { name: 'vcuda_over_ceiling', value: rate / ceiling, unit: 'ratio', scenario, ...atLeast(rate / ceiling, 0.8) },
  ];
}

const bench: Benchmark = {
  name: 'dra-starts',
  description:
    'DRA claims from creation to Running on kube-apiserver + kube-scheduler + kube-controller-manager 1.36 with vcuda node agents in DRA mode and simulated kubelets, beside the same run’s ceiling: as many claims of a driver-less DeviceClass whose Prepare does nothing',
  async run({ log }) {
    const skip = real136SkipReason('real kube-apiserver + kube-scheduler + kube-controller-manager v1.36');
    if (skip) throw new Error(`the dra-starts benchmark needs ${skip}`);
    const plane = await startRealControlPlane136();
    const root = mkdtempSync(join(tmpdir(), 'dra-starts-'));
    try {
      return await measure(plane, root, log);
    } finally {
      await plane.close();
      rmSync(root, { recursive: true, force: true });
    }
  },
};

export default bench;
