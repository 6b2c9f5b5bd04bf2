/**
 * Pod starts end to end, from creation to all Running: N identical share pods on one node against
 * N pods of N distinct sizes on the same node in the same run, and 200 pods on 4 nodes. On the
 * simulator (its scheduler backs off as the shipped kube-scheduler configuration says) and, where
 * `../shared/kubernetes-1.32/` exists, on a real kube-apiserver + kube-scheduler 1.32.
 */
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import { startLocalCluster } from '../../sim/local-cluster.js';
import { liveRows } from '../e2e/e2e-helpers.js';
import { realTierSkipReason, startRealCluster } from '../e2e/real-cluster.js';
import { createNamespace, localClusterRig, type Rig, sharePod } from '../e2e/scheduling-scenarios.js';
import { atLeast, atMost, type Benchmark, type Figure } from './harness.js';

const NS = 'starts';
const ONE_NODE_PODS = 20;
const MANY_PODS = 200;

/** Polls `check` every 100 ms until it holds; fails after `timeoutMs`. */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`starts: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Resolves once `count` pods of the namespace are Running, as a watch reports them. Watched, not
 * polled: a full list of a few hundred pods every 100 ms costs the simulated cluster, which runs
 * in this very process, a fifth of a core.
 */
function allRunning(client: KubeClient, count: number, abort: AbortController, timeoutMs = 600_000): Promise<void> {
  const running = new Set<string>();
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      abort.abort();
      reject(new Error(`starts: timed out waiting for ${count} pods running (${running.size} are)`));
    }, timeoutMs);
    abort.signal.addEventListener('abort', () => clearTimeout(timer));
    const see = (pod: KubeObj, gone = false) => {
      const uid = pod.metadata.uid ?? pod.metadata.name;
      if (!gone && (pod.status as { phase?: string } | undefined)?.phase === 'Running') running.add(uid);
      else running.delete(uid);
      if (running.size < count || abort.signal.aborted) return;
      abort.abort();
      resolve();
    };
    const handlers = {
      onSync: (items: KubeObj[]) => {
        running.clear();
        for (const p of items) see(p);
      },
      onEvent: (e: { type: string; object: KubeObj }) => see(e.object, e.type === 'DELETED'),
    };
    void client.listWatch(podPath(NS), '', handlers, abort.signal);
  });
}

/** Creates the pods at once and returns the seconds until every one runs. */
async function startAll(client: KubeClient, pods: object[]): Promise<number> {
  const start = performance.now();
  const abort = new AbortController();
  const running = allRunning(client, pods.length, abort);
  try {
    await Promise.all(pods.map((p) => client.create(podPath(NS), p)));
    await running;
  } finally {
    abort.abort();
  }
  return (performance.now() - start) / 1000;
}

/** Deletes every pod and waits until they are gone and the ledger holds nothing. */
async function emptyAll(rig: Rig): Promise<void> {
  const items = (await rig.client.list(podPath(NS))).items;
  await Promise.all(items.map((p) => rig.client.delete(podPath(NS, p.metadata.name)).catch(() => undefined)));
  await until('pods gone', async () => (await rig.client.list(podPath(NS))).items.length === 0, 120_000);
  await until('ledger empty', async () => (await liveRows(rig.db)).length === 0, 120_000);
}

async function measure(rig: Rig, tier: string, log: (l: string) => void): Promise<Figure[]> {
  await createNamespace(rig, NS);
  const node = rig.nodeNames[0]!;
  const timed = async (what: string, pods: object[]) => {
    const seconds = await startAll(rig.client, pods);
    log(`${tier}: ${what}: ${pods.length} pods running in ${seconds.toFixed(2)} s`);
    await emptyAll(rig);
    return seconds;
  };
  const figures: Figure[] = [];
  if (rig.nodeNames.length === 1) {
    const identical = await timed(
      'identical, one node',
      Array.from({ length: ONE_NODE_PODS }, (_, i) => sharePod(`same-${i}`, 10, 1024, node)),
    );
    const distinct = await timed(
      'distinct, one node',
      Array.from({ length: ONE_NODE_PODS }, (_, i) => sharePod(`size-${i}`, i + 1, 1024, node)),
    );
    const scenario = `${tier} · ${ONE_NODE_PODS} pods, 1 node`;
    figures.push(
      { name: 'identical_seconds', value: identical, unit: 's', scenario },
      { name: 'distinct_seconds', value: distinct, unit: 's', scenario },
      {
        name: 'identical_over_distinct',
        value: identical / distinct,
        unit: 'ratio',
        scenario,
        ...atMost(identical / distinct, 1.2),
      },
    );
  } else {
    const seconds = await timed(
      'identical, 4 nodes',
      Array.from({ length: MANY_PODS }, (_, i) => sharePod(`many-${i}`, 10, 512)),
    );
    const rate = MANY_PODS / seconds;
    figures.push(
      {
        name: 'all_running_seconds',
        value: seconds,
        unit: 's',
        scenario: `${tier} · ${MANY_PODS} identical pods, 4 nodes`,
      },
      {
        name: 'pods_per_second',
        value: rate,
        unit: 'pods/s',
        scenario: `${tier} · ${MANY_PODS} identical pods, 4 nodes`,
        ...atLeast(rate, 100),
      },
    );
  }
  return figures;
}

const oneNode = () =>
  parseClusterSpec({ name: 'starts', nodes: [{ namePrefix: 'node', count: 1, cards: 4, memoryMiB: 16384 }] });
const fourNodes = () =>
  parseClusterSpec({ name: 'starts', nodes: [{ namePrefix: 'node', count: 4, cards: 8, memoryMiB: 81920 }] });

async function onSimulator(spec: ReturnType<typeof oneNode>, log: (l: string) => void): Promise<Figure[]> {
  const lc = await startLocalCluster({ cluster: spec, logLevel: 'silent' });
  try {
    return await measure(localClusterRig(lc), 'simulator', log);
  } finally {
    await lc.close();
  }
}

async function onRealServers(spec: ReturnType<typeof oneNode>, log: (l: string) => void): Promise<Figure[]> {
  const rc = await startRealCluster(spec);
  try {
    return await measure(rc, 'kube 1.32', log);
  } finally {
    await rc.close();
  }
}

const bench: Benchmark = {
  name: 'starts',
  description:
    'Pod starts from creation to all Running: identical share pods on one node against as many distinct sizes (target ratio <= 1.2), and 200 identical pods on 4 nodes (target >= 100 pods/s), on the simulator (scheduler backoff as the shipped configuration sets) and on a real kube-apiserver + kube-scheduler 1.32 with the simulated kubelets.',
  async run({ log }) {
    const figures = [...(await onSimulator(oneNode(), log)), ...(await onSimulator(fourNodes(), log))];
    const skip = realTierSkipReason();
    if (skip) log(`real-server tier skipped: ${skip}`);
    else figures.push(...(await onRealServers(oneNode(), log)), ...(await onRealServers(fourNodes(), log)));
    return figures;
  },
};

export default bench;
