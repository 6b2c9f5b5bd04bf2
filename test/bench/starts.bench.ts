/**
 * Pod starts end to end, from creation to all Running: N identical share pods on one node against
 * N pods of N distinct sizes on the same node in the same run, and 200 pods on 4 nodes, each
 * cluster warmed up first (unmeasured rounds until every node has started 200 pods; the first
 * round's rate is reported too), every node in a process of its own as on a real cluster. On the simulator (its scheduler backs off as the
 * shipped kube-scheduler configuration says) and, where `../shared/kubernetes-1.32/` exists, on a
 * real kube-apiserver + kube-scheduler 1.32. The ledger is local PostgreSQL when it is reachable
 * (as in production), embedded PGlite otherwise.
 *
 * The 200-pod figure has its ceiling beside it, from the same cluster in the same run: 200 plain
 * pods (no vcuda resources, so no webhook patch, extender, ledger or device plugin) through the
 * same API server, scheduler and kubelets. Every component of the cluster shares this machine's
 * cores, so the ceiling says what the machine allows and the ratio what vcuda costs on top.
 */
import { readFileSync } from 'node:fs';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import { startLocalCluster } from '../../sim/local-cluster.js';
import { liveRows } from '../e2e/e2e-helpers.js';
import { realTierSkipReason, startRealCluster } from '../e2e/real-cluster.js';
import { createNamespace, localClusterRig, type Rig, sharePod } from '../e2e/scheduling-scenarios.js';
import type { ControlPlaneChild } from '../support/control-plane/control-plane-child.js';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../support/db/test-databases.js';
import { type IdleLagProcess, type LagReport, measureOwnLag, startIdleLagProcess } from '../support/lag-probe.js';
import { descendantsOf, procStats } from '../support/process.js';
import { atLeast, atMost, type Benchmark, type Figure } from './harness.js';
import { meanMsBetween, type SchedulerTotals, schedulerTotalsReader } from './scheduler-metrics.js';

const NS = 'starts';
const ONE_NODE_PODS = 20;
const MANY_PODS = 200;
/** The measured share pods of the 200-pod rounds: 200 x 20 core fill 40 of the 4 nodes' 48 cards. */
const MANY_CORE = 20;
const MANY_MEMORY_MIB = 4096;
/**
 * Pods each node starts before anything is measured: a node of a running cluster has started many
 * more, and until then its processes are still compiling their hot paths (each node process on
 * its own), which made the figure depend on how many rounds happened to run first.
 */
const WARM_UP_PODS_PER_NODE = 200;

/**
 * Polls `check` every 100 ms until it holds; fails after `timeoutMs`, saying what was left as
 * `explain` describes it (a slow host's wait that expires must say what it was waiting for).
 */
async function until(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  explain: () => Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      const left = await explain().catch((err: unknown) => `(could not tell: ${String(err)})`);
      throw new Error(`starts: timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}; ${left}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A pod's state in a few words: its phase, its node, and whether it is being deleted. */
function podState(pod: KubeObj): string {
  const phase = (pod.status as { phase?: string } | undefined)?.phase ?? 'no phase';
  const node = (pod.spec as { nodeName?: string } | undefined)?.nodeName;
  const deleting = (pod.metadata as { deletionTimestamp?: string }).deletionTimestamp ? ', terminating' : '';
  return `${phase}${node ? ` on ${node}` : ', unbound'}${deleting}`;
}

/** The pods left, grouped by state, with the first few names of each group. */
function describePods(pods: readonly KubeObj[]): string {
  const byState = new Map<string, string[]>();
  for (const p of pods) {
    const state = podState(p);
    byState.set(state, [...(byState.get(state) ?? []), p.metadata.name]);
  }
  const groups = [...byState].map(([state, names]) => {
    const shown = names.slice(0, 5).join(', ');
    return `${names.length} ${state} (${shown}${names.length > 5 ? ', …' : ''})`;
  });
  return `${pods.length} pods left: ${groups.join('; ')}`;
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
      const notRunning = client
        .list(podPath(NS))
        .then((l) => describePods(l.items.filter((p) => !running.has(p.metadata.uid ?? p.metadata.name))))
        .catch((err: unknown) => `(could not list them: ${String(err)})`);
      void notRunning.then((left) =>
        reject(
          new Error(`starts: timed out waiting for ${count} pods running (${running.size} are); not running: ${left}`),
        ),
      );
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

/**
 * Creates a pod, again when the API server timed out calling the admission webhook: on a host
 * whose cores are taken by others a call can miss its 5 s deadline, and a client would retry it.
 */
async function createRetrying(client: KubeClient, pod: object, tries = 3): Promise<void> {
  for (let i = 1; ; i++) {
    try {
      await client.create(podPath(NS), pod);
      return;
    } catch (err) {
      const timedOut = /failed calling webhook.*(deadline exceeded|timeout)/i.test(String(err));
      if (!timedOut || i >= tries) throw err;
    }
  }
}

/** Busy and total jiffies of the whole machine (/proc/stat): every process of the cluster counts. */
function machineJiffies(): { busy: number; all: number } {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const at = (i: number) => f[i] ?? 0;
  // user nice system idle iowait irq softirq steal
  return { busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7), all: f.reduce((a, b) => a + b, 0) };
}

/**
 * The processes whose CPU is told apart by name; 'this process' holds the control plane (and the
 * simulated API server and scheduler on the simulator); 'simulated nodes' are this process's
 * descendants (each node's kubelet and node agent, its container runtime and containers).
 */
const PROCESSES = ['kube-apiserver', 'etcd', 'kube-scheduler', 'postgres'] as const;
type ProcessName = (typeof PROCESSES)[number] | 'this process' | 'control plane' | 'simulated nodes';

/**
 * CPU jiffies (user + system) of every process of interest, by name, from /proc/PID/stat;
 * `controlPlanePid`: the control plane's own process, where it has one.
 */
function processJiffies(controlPlanePid?: number): Map<ProcessName, number> {
  const stats = procStats();
  const nodes = new Set(descendantsOf(process.pid, stats));
  const out = new Map<ProcessName, number>();
  for (const { pid, comm, jiffies } of stats) {
    // PostgreSQL's backends all count as one ("postgres", or "postgres: …" where titles are set).
    const name: ProcessName | undefined =
      pid === process.pid
        ? 'this process'
        : pid === controlPlanePid
          ? 'control plane'
          : (PROCESSES.find((p) => comm === p || comm.startsWith(`${p}:`)) ??
            (nodes.has(pid) ? 'simulated nodes' : undefined));
    if (name) out.set(name, (out.get(name) ?? 0) + jiffies);
  }
  return out;
}

type Timing = {
  seconds: number;
  cpuMsPerPod: number;
  byProcess: Map<ProcessName, number>;
  /**
   * The control plane's event-loop delay during the round (ms): its own process's on the real
   * tier; on the simulator this process's, which also runs the API server and the scheduler.
   */
  lagP99Ms: number;
  lagMaxMs: number;
  lagSamples: number;
  /** A process that does nothing, meanwhile: what the machine's scheduler alone costs an event loop. */
  idleLagP99Ms: number;
  /** The collector's pauses of the same event loop during the round. */
  gc: LagReport['gc'];
  pods: number;
  /** kube-scheduler's mean per pod (ms), where it can be read: its algorithm (filters and scores), attempt (to the bind's end), queue to bind. */
  algorithmMs?: number;
  cycleMs?: number;
  sliMs?: number;
};

/** What the real tier reads beside the pods: kube-scheduler's histogram totals, the control plane's own process. */
type Probes = {
  readScheduler?: () => Promise<SchedulerTotals>;
  controlPlane?: () => ControlPlaneChild | undefined;
  idle: IdleLagProcess;
};

/** The event-loop delay of the control plane's own process where it has one, else of this one. */
function measureLag(controlPlane: ControlPlaneChild | undefined): () => Promise<LagReport> {
  if (controlPlane) return controlPlane.measureLag();
  return measureOwnLag();
}

/** Creates the pods at once and returns the seconds until every one runs, and the machine's CPU per pod. */
async function startAll(client: KubeClient, pods: object[], probes: Probes): Promise<Timing> {
  const { readScheduler } = probes;
  const controlPlane = probes.controlPlane?.();
  const schedulerBefore = await readScheduler?.();
  const start = performance.now();
  const before = machineJiffies();
  const processesBefore = processJiffies(controlPlane?.pid);
  const abort = new AbortController();
  const running = allRunning(client, pods.length, abort);
  const stopLag = measureLag(controlPlane);
  const stopIdleLag = probes.idle.measureLag();
  try {
    await Promise.all(pods.map((p) => createRetrying(client, p)));
    await running;
  } finally {
    abort.abort();
  }
  const lag = await stopLag();
  const idleLagP99Ms = (await stopIdleLag()).p99Ms;
  const lagMs = { lagP99Ms: lag.p99Ms, lagMaxMs: lag.maxMs, lagSamples: lag.samples, idleLagP99Ms, gc: lag.gc };
  const seconds = (performance.now() - start) / 1000;
  const schedulerAfter = schedulerBefore && (await readScheduler?.());
  const scheduler =
    schedulerBefore && schedulerAfter
      ? {
          algorithmMs: meanMsBetween(schedulerBefore.algorithm, schedulerAfter.algorithm),
          cycleMs: meanMsBetween(schedulerBefore.attempt, schedulerAfter.attempt),
          sliMs: meanMsBetween(schedulerBefore.sli, schedulerAfter.sli),
        }
      : {};
  const jiffyMs = 10; // USER_HZ is 100 on Linux
  const byProcess = new Map<ProcessName, number>();
  for (const [name, jiffies] of processJiffies(controlPlane?.pid)) {
    byProcess.set(name, ((jiffies - (processesBefore.get(name) ?? 0)) * jiffyMs) / pods.length);
  }
  const cpuMsPerPod = ((machineJiffies().busy - before.busy) * jiffyMs) / pods.length;
  return { seconds, cpuMsPerPod, byProcess, ...lagMs, ...scheduler, pods: pods.length };
}

/**
 * Deletes every pod and waits until they are gone and the ledger holds nothing. The deadline
 * grows with the host: never less than two minutes, and twenty times what starting the same pods
 * took here, so a slow host's slower deletions are not mistaken for pods that never go.
 */
async function emptyAll(rig: Rig, startSeconds: number): Promise<void> {
  const timeoutMs = Math.max(120_000, 20 * startSeconds * 1000);
  const items = (await rig.client.list(podPath(NS))).items;
  await Promise.all(items.map((p) => rig.client.delete(podPath(NS, p.metadata.name)).catch(() => undefined)));
  const left = async () => (await rig.client.list(podPath(NS))).items;
  await until(
    'pods gone',
    async () => (await left()).length === 0,
    timeoutMs,
    async () => describePods(await left()),
  );
  await until(
    'ledger empty',
    async () => (await liveRows(rig.db)).length === 0,
    timeoutMs,
    async () => {
      const rows = await liveRows(rig.db);
      const pods = new Set(rows.map((r) => r.podUid));
      return `the ledger still holds ${rows.length} rows of ${pods.size} pods (uids ${[...pods].slice(0, 5).join(', ')})`;
    },
  );
}

type Timed = (what: string, pods: object[]) => Promise<Timing>;

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** (a) Identical, distinct, distinct, identical: what drifts during the run weighs on both alike. */
async function identicalAgainstDistinct(timed: Timed, node: string, tier: string): Promise<Figure[]> {
  const identicalPods = () => Array.from({ length: ONE_NODE_PODS }, (_, i) => sharePod(`same-${i}`, 10, 1024, node));
  const distinctPods = () => Array.from({ length: ONE_NODE_PODS }, (_, i) => sharePod(`size-${i}`, i + 1, 1024, node));
  const identical: number[] = [];
  const distinct: number[] = [];
  identical.push((await timed('identical, one node', identicalPods())).seconds);
  distinct.push((await timed('distinct, one node', distinctPods())).seconds);
  distinct.push((await timed('distinct, one node', distinctPods())).seconds);
  identical.push((await timed('identical, one node', identicalPods())).seconds);
  const scenario = `${tier} · ${ONE_NODE_PODS} pods, 1 node`;
  const ratio = mean(identical) / mean(distinct);
  return [
    { name: 'identical_seconds', value: mean(identical), unit: 's', scenario },
    { name: 'distinct_seconds', value: mean(distinct), unit: 's', scenario },
    { name: 'identical_over_distinct', value: ratio, unit: 'ratio', scenario, ...atMost(ratio, 1.2) },
  ];
}

/** A pod the same as a share pod but without vcuda resources: no webhook patch, extender, ledger or device plugin. */
function plainPod(name: string): object {
  const pod = sharePod(name, 10, 512);
  return { ...pod, spec: { ...pod.spec, containers: pod.spec.containers.map(({ resources: _, ...c }) => c) } };
}

/**
 * (b) 200 identical share pods over the nodes, beside 200 plain pods on the same cluster: plain,
 * vcuda, vcuda, plain, so what drifts during the run weighs on both alike.
 */
async function manyPods(timed: Timed, tier: string): Promise<Figure[]> {
  const sharePods = () =>
    Array.from({ length: MANY_PODS }, (_, i) => sharePod(`many-${i}`, MANY_CORE, MANY_MEMORY_MIB));
  const plainPods = () => Array.from({ length: MANY_PODS }, (_, i) => plainPod(`plain-${i}`));
  const plain: Timing[] = [];
  const vcuda: Timing[] = [];
  plain.push(await timed('plain (ceiling), 4 nodes', plainPods()));
  vcuda.push(await timed('identical, 4 nodes', sharePods()));
  vcuda.push(await timed('identical, 4 nodes', sharePods()));
  plain.push(await timed('plain (ceiling), 4 nodes', plainPods()));
  const seconds = mean(vcuda.map((t) => t.seconds));
  const rate = MANY_PODS / seconds;
  const plainRate = MANY_PODS / mean(plain.map((t) => t.seconds));
  const scenario = `${tier} · ${MANY_PODS} identical pods (core ${MANY_CORE}, ${MANY_MEMORY_MIB} MiB, all fit), 4 nodes`;
  const ceiling = `${tier} · ${MANY_PODS} plain pods (no vcuda resources), 4 nodes, same run`;
  return [
    { name: 'all_running_seconds', value: seconds, unit: 's', scenario },
    { name: 'pods_per_second', value: rate, unit: 'pods/s', scenario, ...atLeast(rate, 100) },
    { name: 'machine_cpu_ms_per_pod', value: mean(vcuda.map((t) => t.cpuMsPerPod)), unit: 'ms', scenario },
    { name: 'plain_pods_per_second', value: plainRate, unit: 'pods/s', scenario: ceiling },
    {
      name: 'plain_machine_cpu_ms_per_pod',
      value: mean(plain.map((t) => t.cpuMsPerPod)),
      unit: 'ms',
      scenario: ceiling,
    },
    {
      name: 'share_over_plain_rate',
      value: rate / plainRate,
      unit: 'ratio',
      scenario,
      ...atLeast(rate / plainRate, 0.8),
    },
    ...loopAndCycle(vcuda, plain, scenario, ceiling, tier),
    ...cpuByProcess(vcuda, plain, scenario),
  ];
}

/**
 * The control plane's event-loop delay during the rounds, beside an idle process's (what the
 * machine's scheduler alone costs an event loop then), and kube-scheduler's own time per pod. On
 * the real tier with PostgreSQL the control plane runs in a process of its own, as in a cluster,
 * so its lag is what a filter or prioritize call waits behind there; on the simulator this process
 * runs it with the API server and the scheduler, so no target is set there.
 */
function loopAndCycle(vcuda: Timing[], plain: Timing[], scenario: string, ceiling: string, tier: string): Figure[] {
  const worst = (ts: Timing[], f: (t: Timing) => number) => Math.max(...ts.map(f));
  const lagP99 = worst(vcuda, (t) => t.lagP99Ms);
  const real = tier.startsWith('kube');
  const figures: Figure[] = [
    { name: 'event_loop_lag_p99_ms', value: lagP99, unit: 'ms', scenario, ...(real ? atMost(lagP99, 10) : {}) },
    { name: 'event_loop_lag_max_ms', value: worst(vcuda, (t) => t.lagMaxMs), unit: 'ms', scenario },
    { name: 'plain_event_loop_lag_p99_ms', value: worst(plain, (t) => t.lagP99Ms), unit: 'ms', scenario: ceiling },
    // The machine's own share of it: an idle process's loop, in the same vcuda rounds.
    { name: 'idle_process_lag_p99_ms', value: worst(vcuda, (t) => t.idleLagP99Ms), unit: 'ms', scenario },
    ...collectorPauses(vcuda, plain, scenario, ceiling),
  ];
  if (vcuda.every((t) => t.cycleMs !== undefined)) {
    // kube-scheduler's own histograms, vcuda beside plain: the per-pod figure and its name.
    const scheduler: [keyof Timing, string][] = [
      ['algorithmMs', 'scheduler_algorithm_ms_per_pod'],
      ['cycleMs', 'scheduler_attempt_ms_per_pod'],
      ['sliMs', 'scheduler_queue_to_bind_ms_per_pod'],
    ];
    for (const [field, name] of scheduler) {
      const of = (ts: Timing[]) => mean(ts.map((t) => Number(t[field] ?? Number.NaN)));
      figures.push({ name, value: of(vcuda), unit: 'ms', scenario });
      figures.push({ name: `plain_${name}`, value: of(plain), unit: 'ms', scenario: ceiling });
    }
  }
  return figures;
}

/**
 * The collector's share of that delay: how long it paused the same event loop per pod, vcuda pods
 * beside plain ones, and its longest young-generation pause (a scavenge stops the thread however
 * little survives; its length is what a filter call arriving then waits).
 */
function collectorPauses(vcuda: Timing[], plain: Timing[], scenario: string, ceiling: string): Figure[] {
  const perPod = (ts: Timing[]) => mean(ts.map((t) => t.gc.totalMs / t.pods));
  const worst = (ts: Timing[], f: (t: Timing) => number) => Math.max(...ts.map(f));
  return [
    { name: 'gc_pause_ms_per_pod', value: perPod(vcuda), unit: 'ms', scenario },
    { name: 'plain_gc_pause_ms_per_pod', value: perPod(plain), unit: 'ms', scenario: ceiling },
    { name: 'gc_young_pause_max_ms', value: worst(vcuda, (t) => t.gc.youngMaxMs), unit: 'ms', scenario },
    { name: 'gc_pause_max_ms', value: worst(vcuda, (t) => t.gc.maxMs), unit: 'ms', scenario },
  ];
}

/** CPU per pod of each process that ran during the rounds, vcuda pods beside plain ones. */
function cpuByProcess(vcuda: Timing[], plain: Timing[], scenario: string): Figure[] {
  const names = new Set([...vcuda, ...plain].flatMap((t) => [...t.byProcess.keys()]));
  const key = (n: ProcessName) => n.replaceAll(/[^a-z]+/g, '_');
  const perPod = (ts: Timing[], n: ProcessName) => mean(ts.map((t) => t.byProcess.get(n) ?? 0));
  return [...names].flatMap((n) => [
    { name: `cpu_ms_per_pod_${key(n)}`, value: perPod(vcuda, n), unit: 'ms', scenario },
    { name: `plain_cpu_ms_per_pod_${key(n)}`, value: perPod(plain, n), unit: 'ms', scenario },
  ]);
}

async function measure(
  rig: Rig,
  tier: string,
  log: (l: string) => void,
  probes: Omit<Probes, 'idle'> = {},
): Promise<Figure[]> {
  const idle = await startIdleLagProcess();
  try {
    return await measureWith(rig, tier, log, { ...probes, idle });
  } finally {
    await idle.close();
  }
}

async function measureWith(rig: Rig, tier: string, log: (l: string) => void, probes: Probes): Promise<Figure[]> {
  await createNamespace(rig, NS);
  const timed: Timed = async (what, pods) => {
    const timing = await startAll(rig.client, pods, probes);
    const parts = [...timing.byProcess].map(([n, ms]) => `${n} ${ms.toFixed(1)}`).join(', ');
    const cpu = `${timing.cpuMsPerPod.toFixed(1)} ms of machine CPU per pod (${parts})`;
    const { gc } = timing;
    const pauses = `${gc.pauses} collector pauses, ${gc.totalMs.toFixed(0)} ms in all (${gc.youngPauses} young, longest ${gc.youngMaxMs.toFixed(1)} ms)`;
    const lag = `event loop p99 ${timing.lagP99Ms.toFixed(1)} ms, max ${timing.lagMaxMs.toFixed(1)} (${timing.lagSamples} samples), ${pauses} (an idle process's p99 ${timing.idleLagP99Ms.toFixed(1)})`;
    const cycle =
      timing.cycleMs === undefined
        ? ''
        : `, scheduler algorithm ${timing.algorithmMs?.toFixed(1)} ms and attempt ${timing.cycleMs.toFixed(1)} ms per pod`;
    log(`${tier}: ${what}: ${pods.length} pods running in ${timing.seconds.toFixed(2)} s, ${cpu}, ${lag}${cycle}`);
    await emptyAll(rig, timing.seconds);
    return timing;
  };
  // A fresh cluster's first pods pay for compiling its code paths (in every process: the node
  // processes too) and opening its connections: rounds of the measured size, not measured, until
  // every node has started WARM_UP_PODS_PER_NODE pods. The first round's rate is kept: it is what
  // a burst right after the cluster starts gets.
  const size = rig.nodeNames.length === 1 ? ONE_NODE_PODS : MANY_PODS;
  const warmUpPerNode = Number(process.env.VCUDA_BENCH_STARTS_WARM_UP ?? WARM_UP_PODS_PER_NODE);
  const rounds = Math.ceil((warmUpPerNode * rig.nodeNames.length) / size);
  let first: Timing | undefined;
  for (let round = 1; round <= rounds; round++) {
    const warmUp = Array.from({ length: size }, (_, i) => sharePod(`warm-${i}`, 10, 512));
    const timing = await timed(`warm-up ${round} of ${rounds}, not measured`, warmUp);
    first ??= timing;
  }
  const cold = { name: 'first_round_pods_per_second', value: size / (first?.seconds ?? Number.NaN), unit: 'pods/s' };
  const scenario = `${tier} · first ${size} pods on a fresh cluster (${rig.nodeNames.length} node(s))`;
  const figures =
    rig.nodeNames.length === 1
      ? await identicalAgainstDistinct(timed, rig.nodeNames[0]!, tier)
      : await manyPods(timed, tier);
  // With no warm-up round (VCUDA_BENCH_STARTS_WARM_UP=0) there is no cold figure to report.
  return first ? [{ ...cold, scenario }, ...figures] : figures;
}

const oneNode = () =>
  parseClusterSpec({ name: 'starts', nodes: [{ namePrefix: 'node', count: 1, cards: 4, memoryMiB: 16384 }] });
const fourNodes = () =>
  parseClusterSpec({ name: 'starts', nodes: [{ namePrefix: 'node', count: 4, cards: 12, memoryMiB: 81920 }] });

/** The production ledger (local PostgreSQL, a fresh database) when reachable, else embedded PGlite. */
async function benchLedger(): Promise<{ label: string; database?: TestDatabase }> {
  if (!(await isPostgresReachable())) return { label: 'PGlite ledger' };
  return { label: 'PostgreSQL ledger', database: await createTestDatabase('postgres') };
}

async function onSimulator(spec: ReturnType<typeof oneNode>, log: (l: string) => void): Promise<Figure[]> {
  const { label, database } = await benchLedger();
  try {
    const lc = await startLocalCluster({
      cluster: spec,
      logLevel: 'silent',
      // As on a real cluster, each node's kubelet and agent work beside the rest, not on its event loop.
      nodeProcesses: true,
      ...(database?.url ? { databaseUrl: database.url } : {}),
    });
    try {
      return await measure(localClusterRig(lc), `simulator, ${label}`, log);
    } finally {
      await lc.close();
    }
  } finally {
    await database?.drop();
  }
}

async function onRealServers(spec: ReturnType<typeof oneNode>, log: (l: string) => void): Promise<Figure[]> {
  const { label, database } = await benchLedger();
  try {
    // With PostgreSQL the control plane runs in a process of its own, as in a cluster, so its
    // event loop and CPU are its own, not this process's pod creation and watch besides.
    const rc = await startRealCluster(spec, {
      nodeProcesses: true,
      ...(database?.url ? { databaseUrl: database.url, controlPlaneProcess: true } : {}),
    });
    try {
      const readScheduler = await schedulerTotalsReader(rc.client, rc.dir);
      return await measure(rc, `kube 1.32, ${label}`, log, { readScheduler, controlPlane: rc.controlPlaneProcess });
    } finally {
      await rc.close();
    }
  } finally {
    await database?.drop();
  }
}

const bench: Benchmark = {
  name: 'starts',
  description:
    'Pod starts from creation to all Running, after unmeasured warm-up rounds in which every node starts 200 pods (the first round’s rate is reported as the cold figure), every node in a process of its own: identical share pods on one node against as many distinct sizes, each run twice in the order identical, distinct, distinct, identical (target ratio of the means <= 1.2), and 200 identical share pods (core 20, 4096 MiB, all fitting) on 4 nodes of 12 cards (target >= 100 pods/s) beside 200 plain pods on the same cluster (the ceiling of this machine, same run: target vcuda >= 0.8 of it), with the CPU per pod of the whole machine, the control plane’s event-loop delay (its own process’s on the real tier: target p99 <= 10 ms, beside an idle process’s in the same rounds, and the collector’s pauses of it) and kube-scheduler’s own cycle time per pod (from its metrics), on the simulator (scheduler backoff as the shipped configuration sets) and on a real kube-apiserver + kube-scheduler 1.32 with the simulated kubelets.',
  async run({ log }) {
    // On a host whose cores others hold, a connection of the cluster's plumbing is now and then reset
    // with no listener left to hear it (seen as "socket hang up" / ECONNRESET, source not found):
    // counted and told, rather than ending a run of many minutes. Any other error still ends it.
    const resets = (err: Error & { code?: string }) => {
      if (err.code !== 'ECONNRESET') throw err;
      log(`connection reset with no listener (run goes on): ${err.message}`);
    };
    process.on('uncaughtException', resets);
    try {
      return await runTiers(log);
    } finally {
      process.off('uncaughtException', resets);
    }
  },
};

/** The tiers and clusters VCUDA_BENCH_STARTS_TIERS and VCUDA_BENCH_STARTS_CLUSTERS pick. */
async function runTiers(log: (l: string) => void): Promise<Figure[]> {
  // VCUDA_BENCH_STARTS_TIERS=simulator,real and VCUDA_BENCH_STARTS_CLUSTERS=one,four pick the
  // parts (all by default); VCUDA_BENCH_STARTS_WARM_UP sets the warm-up pods per node.
  const tiers = new Set((process.env.VCUDA_BENCH_STARTS_TIERS ?? 'simulator,real').split(','));
  const clusters = new Set((process.env.VCUDA_BENCH_STARTS_CLUSTERS ?? 'one,four').split(','));
  const specs = [...(clusters.has('one') ? [oneNode()] : []), ...(clusters.has('four') ? [fourNodes()] : [])];
  const figures: Figure[] = [];
  if (tiers.has('simulator')) for (const spec of specs) figures.push(...(await onSimulator(spec, log)));
  const skip = realTierSkipReason();
  if (!tiers.has('real')) return figures;
  if (skip) log(`real-server tier skipped: ${skip}`);
  else for (const spec of specs) figures.push(...(await onRealServers(spec, log)));
  return figures;
}

export default bench;
