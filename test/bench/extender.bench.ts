/**
 * The scheduler extender's two figures.
 *
 * filter_prioritize_p99_ms: one scheduling cycle's extender work (POST /filter then /prioritize,
 * JSON in and out through the hono app, no sockets; kube-scheduler's parsing of filter's answer
 * and writing of prioritize's request, between the two, is not timed) on a cluster of 5,000 nodes × 8 GPUs with
 * realistic occupancy (a third of the cards empty, a fifth held whole, the rest shared by 1-3 pods).
 * kube-scheduler offers the extender the nodes its own filters kept, at most about 10 % of a
 * 5,000-node cluster (percentageOfNodesToScore's adaptive default), so a call carries 500 names;
 * the same figure for all 5,000 names is reported beside it. Every measured pod asks something no
 * earlier pod asked, so no card choice is reused (the worst case); pods of a few repeated
 * workloads, whose choices are reused on nodes that did not change, are reported separately.
 *
 * binds_per_s: pods per second through filter -> prioritize -> bind, scheduling cycles one after
 * another and up to 16 binds in flight as kube-scheduler's binding goroutines would, with the ledger on local PostgreSQL (PGlite when no
 * server answers; the scenario says which). The nodes are registered in the ledger first, as the
 * control plane does when its watch cache syncs; that one-time cost is its own figure. The Kubernetes calls are answered in memory
 * (kube.mode none), so the figure is the extender's and the ledger's cost, not the API server's.
 * A bind answers once its Binding exists; its confirm commits after (batched), and the ledger
 * calls per bind are counted once the last one has.
 *
 * VCUDA_BENCH_EXTENDER_PARTS=filter,bind,grouped picks the parts to run (all three by default),
 * e.g. to profile one: `VCUDA_BENCH_EXTENDER_PARTS=bind node --cpu-prof --cpu-prof-dir=/tmp/prof
 * --import tsx test/bench/main.ts extender`, then test/bench/cpu-profile-summary.ts.
 */
import { cpus, loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { Hono } from 'hono';
import { Registry } from 'prom-client';
import type { ClusterState } from '../../control-plane/cluster-state.js';
import { guardedExtender } from '../../control-plane/extender/client-certificate.js';
import { createExtenderMetrics } from '../../control-plane/extender/extender-metrics.js';
import {
  type ExtenderClientCredentials,
  issueEphemeralExtenderTls,
} from '../../control-plane/extender/extender-tls.js';
import { LedgerNodes } from '../../control-plane/extender/ledger-nodes.js';
import { PodWriteBatcher } from '../../control-plane/extender/pod-write-batcher.js';
import { extenderRoutes } from '../../control-plane/extender/routes.js';
import { createLocalKube } from '../../control-plane/local-kube.js';
import type { PodWithStatus } from '../../control-plane/placement/cluster-snapshot.js';
import { createAssignmentSigner } from '../../control-plane/signing-keys.js';
import { listen } from '../../control-plane/starters/http-listener.js';
import type { VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { assignedPod, gpuNode, gpuPod, policy, testState } from '../support/control-plane/builders.js';
import { TEST_NOW, testKeys } from '../support/control-plane/extender-harness.js';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../support/db/test-databases.js';
import { atLeast, atMost, type Benchmark, type Figure, percentile } from './harness.js';

const NODES = 5000;
const CARDS = 8;
const OFFERED = 500;
const ITERATIONS = Number(process.env.VCUDA_BENCH_FILTER_ITERATIONS ?? 2000);
const BIND_NODES = 500;
const BIND_PODS = Number(process.env.VCUDA_BENCH_BIND_PODS ?? 3000);
const BIND_OFFERED = 250;
const IN_FLIGHT = 16;

/** A small deterministic generator, so every run sees the same cluster. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function fillCluster(state: ClusterState, nodes: number, rand: () => number): void {
  let n = 0;
  for (let i = 0; i < nodes; i++) {
    const name = `node-${i}`;
    state.upsertNode(gpuNode({ name, cards: CARDS }));
    for (let c = 0; c < CARDS; c++) {
      const r = rand();
      if (r < 0.33) continue;
      if (r < 0.53) {
        state.upsertPod(assignedPod(`w${n++}`, name, [{ core: 100, memoryMiB: 81920, cards: [c] }]));
        continue;
      }
      const shares = 1 + Math.floor(rand() * 3);
      for (let s = 0; s < shares; s++) {
        const core = 10 + Math.floor(rand() * 20);
        const memoryMiB = 4096 + Math.floor(rand() * 12288);
        state.upsertPod(assignedPod(`s${n++}`, name, [{ core, memoryMiB, cards: [c] }]));
      }
    }
  }
}

function makeApp(
  state: ClusterState,
  ledger: Parameters<typeof extenderRoutes>[0]['ledger'],
  signer: Parameters<typeof extenderRoutes>[0]['signer'],
  shared: { ledgerNodes?: LedgerNodes; confirms?: PodWriteBatcher } = {},
) {
  return extenderRoutes({
    config: {
      cluster: 'bench',
      quantity: policy,
      defaultPlacement: 'binpack',
      heartbeatStaleMs: 3_600_000,
      assignmentTtlMs: 600_000,
      instanceId: 'bench',
      eventIntervalMs: 60_000,
    },
    state,
    kube: createLocalKube(state),
    ledger,
    signer,
    clock: () => TEST_NOW,
    metrics: createExtenderMetrics(new Registry()),
    ...shared,
  });
}

/** The extender's answer as text: reading it is the extender's work, parsing it kube-scheduler's. */
async function callText(app: ReturnType<typeof extenderRoutes>, path: string, body: string): Promise<string> {
  const res = await app.request(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${text}`);
  return text;
}

async function call(app: ReturnType<typeof extenderRoutes>, path: string, body: string): Promise<unknown> {
  return JSON.parse(await callText(app, path, body));
}

function sample(names: readonly string[], k: number, rand: () => number): string[] {
  const pool = [...names];
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(rand() * (pool.length - i));
    [pool[i], pool[j]] = [pool[j] as string, pool[i] as string];
  }
  return pool.slice(0, k);
}

/**
 * The ceiling of filter + prioritize: an extender that parses the same request and answers with
 * as many bytes as the real one did for it (`answerBytes`, set before each call), doing nothing
 * else. Measured the same way (through hono, no sockets), so the ratio is the extender's own work.
 */
function noopExtender(answerBytes: { filter: number; prioritize: number }): Hono {
  const app = new Hono();
  const json = { 'content-type': 'application/json' };
  app.post('/filter', async (c) => {
    await c.req.json();
    return c.body(' '.repeat(answerBytes.filter), 200, json);
  });
  app.post('/prioritize', async (c) => {
    await c.req.json();
    return c.body(' '.repeat(answerBytes.prioritize), 200, json);
  });
  return app;
}

async function measureFilterPrioritize(log: (s: string) => void): Promise<Figure[]> {
  const rand = seeded(42);
  const state = testState();
  const t0 = performance.now();
  fillCluster(state, NODES, rand);
  // Every assignment is verified (as after a watch cache's first list) before anything is measured.
  await state.settled();
  log(`cluster of ${NODES} nodes x ${CARDS} GPUs built and verified in ${Math.round(performance.now() - t0)} ms`);
  const keys = await testKeys();
  const noLedger = {
    upsertNode: async () => {},
    reserve: async () => ({ reused: false }),
    confirmMany: async () => ({ missing: [] }),
    release: async () => ({ released: 0 }),
  };
  const app = makeApp(state, noLedger, createAssignmentSigner(keys, 600));
  const names = [...state.snapshot().nodes.keys()];
  const pods = [
    gpuPod('share-30', [{ core: 30, memoryMiB: 8192 }]),
    gpuPod('share-50', [{ core: 50, memoryMiB: 20000 }]),
    gpuPod('two-cards', [{ core: 200 }]),
  ];
  const offers = Array.from({ length: 16 }, () => sample(names, OFFERED, rand));
  const cpuMs: number[] = [];
  const answerBytes = { filter: 0, prioritize: 0 };
  const noop = noopExtender(answerBytes);
  const noopMs: number[] = [];
  const noopCpuMs: number[] = [];
  let fresh = 0;
  // Bytes of JSON each cycle carries, summed over a run: filter's request and answer, prioritize's answer.
  const bytes = { filterArgs: 0, filterAnswer: 0, prioritizeAnswer: 0 };
  // `unique`: every pod asks something no earlier pod asked (another memory size), so no node can
  // reuse a card choice made for an earlier pod: the worst case, and the figure with the target.
  const run = async (iterations: number, nameSets: string[][], unique = true): Promise<number[]> => {
    const out: number[] = [];
    cpuMs.length = 0;
    for (let i = 0; i < iterations; i++) {
      fresh += 1;
      const pod = unique
        ? gpuPod(`u${fresh}`, [
            i % 3 === 2 ? { core: 200, memoryMiB: 1000 + fresh } : { core: 30, memoryMiB: 4096 + fresh },
          ])
        : pods[i % pods.length];
      const body = JSON.stringify({
        Pod: pod,
        Nodes: null,
        NodeNames: nameSets[i % nameSets.length],
      });
      // Timed: the extender's two answers. Not timed: kube-scheduler's side between them (parsing
      // filter's answer, writing prioritize's request), which runs in its own process.
      let cpu = process.cpuUsage();
      let start = performance.now();
      const filterText = await callText(app, '/filter', body);
      let elapsed = performance.now() - start;
      let used = process.cpuUsage(cpu);
      let cpuUs = used.user + used.system;
      const filtered = JSON.parse(filterText) as { NodeNames: string[] };
      const next = JSON.stringify({ Pod: pod, Nodes: null, NodeNames: filtered.NodeNames });
      cpu = process.cpuUsage();
      start = performance.now();
      const prioritizeText = await callText(app, '/prioritize', next);
      elapsed += performance.now() - start;
      used = process.cpuUsage(cpu);
      cpuUs += used.user + used.system;
      out.push(elapsed);
      cpuMs.push(cpuUs / 1000);
      // The ceiling, right after on the same requests: parse them, answer as many bytes.
      answerBytes.filter = filterText.length;
      answerBytes.prioritize = prioritizeText.length;
      cpu = process.cpuUsage();
      start = performance.now();
      await callText(noop, '/filter', body);
      await callText(noop, '/prioritize', next);
      noopMs.push(performance.now() - start);
      used = process.cpuUsage(cpu);
      noopCpuMs.push((used.user + used.system) / 1000);
      bytes.filterArgs += body.length;
      bytes.filterAnswer += filterText.length;
      bytes.prioritizeAnswer += prioritizeText.length;
    }
    cpuMs.sort((a, b) => a - b);
    return out.sort((a, b) => a - b);
  };
  await run(200, offers); // warm up the JIT
  bytes.filterArgs = bytes.filterAnswer = bytes.prioritizeAnswer = 0;
  noopMs.length = 0;
  noopCpuMs.length = 0;
  const offered = await run(ITERATIONS, offers);
  const noopCpuP99 = percentile(
    noopCpuMs.sort((a, b) => a - b),
    99,
  );
  const noopP99 = percentile(
    noopMs.sort((a, b) => a - b),
    99,
  );
  const kb = (n: number) => `${(n / ITERATIONS / 1024).toFixed(1)} KiB`;
  log(
    `JSON per cycle: filter args ${kb(bytes.filterArgs)}, filter answer ${kb(bytes.filterAnswer)}, prioritize answer ${kb(bytes.prioritizeAnswer)}`,
  );
  const offeredCpuP99 = percentile(cpuMs, 99);
  const offeredCpuP50 = percentile(cpuMs, 50);
  await run(300, offers, false); // the repeated requests' first visits
  const repeated = await run(ITERATIONS, offers, false);
  const all = await run(300, [names]);
  const p99 = percentile(offered, 99);
  log(
    `filter+prioritize over ${OFFERED} offered nodes: p50 ${percentile(offered, 50).toFixed(3)} ms, p99 ${p99.toFixed(3)} ms; no-op extender p99 ${noopP99.toFixed(3)} ms`,
  );
  const load = loadavg()[0] ?? 0;
  log(`load average ${load.toFixed(1)} on ${cpus().length} cores during the run`);
  return [
    {
      name: 'filter_prioritize_p99_ms',
      value: p99,
      unit: 'ms',
      ...atMost(p99, 2),
      scenario: `${NODES} nodes x ${CARDS} GPUs, ${OFFERED} offered per call, every pod a new request`,
    },
    {
      name: 'filter_prioritize_p99_ms_noop',
      value: noopP99,
      unit: 'ms',
      scenario: `same requests to a no-op extender (parses the request, answers as many bytes)`,
    },
    {
      name: 'filter_prioritize_p99_over_noop',
      value: Number((p99 / noopP99).toFixed(2)),
      unit: 'ratio',
      scenario: `${OFFERED} offered per call, every pod a new request, same run`,
      ...atMost(p99 / noopP99, 2),
    },
    {
      name: 'filter_prioritize_cpu_p99_ms_noop',
      value: noopCpuP99,
      unit: 'ms',
      scenario: 'same requests to the no-op extender, CPU time',
    },
    {
      // CPU time leaves out the waits for a core the neighbours hold, which swamp both p99s on a busy host.
      name: 'filter_prioritize_cpu_p99_over_noop',
      value: Number((offeredCpuP99 / noopCpuP99).toFixed(2)),
      unit: 'ratio',
      scenario: `${OFFERED} offered per call, CPU time, same run`,
    },
    {
      name: 'filter_prioritize_p50_ms',
      value: percentile(offered, 50),
      unit: 'ms',
      scenario: `${OFFERED} offered per call`,
    },
    // CPU time of this process per cycle: the work itself, without the wait for a busy CPU.
    {
      name: 'filter_prioritize_cpu_p50_ms',
      value: offeredCpuP50,
      unit: 'ms',
      scenario: `${OFFERED} offered, CPU time`,
    },
    {
      name: 'filter_prioritize_cpu_p99_ms',
      value: offeredCpuP99,
      unit: 'ms',
      scenario: `${OFFERED} offered, CPU time`,
    },
    {
      name: 'filter_prioritize_repeated_p99_ms',
      value: percentile(repeated, 99),
      unit: 'ms',
      scenario: `${OFFERED} offered, pods of 3 workloads (card choices reused on unchanged nodes)`,
    },
    {
      name: 'machine_load_average',
      value: Number(load.toFixed(2)),
      unit: 'runnable',
      scenario: `1-minute load average on ${cpus().length} cores (shared machine)`,
    },
    {
      name: 'filter_prioritize_all_nodes_p99_ms',
      value: percentile(all, 99),
      unit: 'ms',
      scenario: `all ${NODES} nodes offered per call`,
    },
  ];
}

/** `grouped`: the ledger's reservations and releases go out with group commit (migration 0011). */
async function measureBinds(log: (s: string) => void, grouped = false): Promise<Figure[]> {
  const kind = (await isPostgresReachable()) ? 'postgres' : 'pglite';
  const tdb: TestDatabase = await createTestDatabase(kind);
  try {
    const db: VcudaDb = kind === 'postgres' ? await tdb.open(IN_FLIGHT) : tdb.db;
    const rand = seeded(7);
    const state = testState();
    for (let i = 0; i < BIND_NODES; i++) state.upsertNode(gpuNode({ name: `node-${i}`, cards: CARDS }));
    const shapes = [10, 20, 30, 40, 50, 60, 100];
    const pods = Array.from({ length: BIND_PODS }, (_, i) => {
      const core = shapes[i % shapes.length] as number;
      return gpuPod(`p${i}`, [core === 100 ? { core } : { core, memoryMiB: core * 512 }]);
    });
    for (const p of pods) state.upsertPod(p);
    const ledger = createLedger(db, { clock: () => TEST_NOW, ...(grouped ? { groupCommit: { maxBatch: 64 } } : {}) });
    // As the control plane does once its watch cache is synced: the ledger learns every node's
    // cards before binds start (a one-time cost per node, reported on its own below).
    const ledgerNodes = new LedgerNodes(ledger, 'bench');
    const r0 = performance.now();
    const registered = await ledgerNodes.ensureAll(state.snapshot().nodes.values());
    const registrationMs = performance.now() - r0;
    if (registered.failed > 0) throw new Error(`node registration failed: ${String(registered.firstError)}`);
    log(`${registered.registered} nodes registered in the ledger in ${registrationMs.toFixed(0)} ms`);
    // Counted from here: the binds' own ledger calls, each one round trip (and one commit).
    const calls = { reserve: 0, confirmMany: 0, other: 0 };
    const counting = <T>(kind: keyof typeof calls, call: () => T): T => {
      calls[kind] += 1;
      return call();
    };
    const counted: Parameters<typeof extenderRoutes>[0]['ledger'] = {
      reserve: (r) => counting('reserve', () => ledger.reserve(r)),
      confirmMany: (c, uids) => counting('confirmMany', () => ledger.confirmMany(c, uids)),
      release: (c, uid) => counting('other', () => ledger.release(c, uid)),
      upsertNode: (c, n, cards) => counting('other', () => ledger.upsertNode(c, n, cards)),
    };
    const confirms = new PodWriteBatcher((uids) => counted.confirmMany('bench', uids));
    const app = makeApp(state, counted, createAssignmentSigner(await testKeys(), 600), { ledgerNodes, confirms });
    const names = [...state.snapshot().nodes.keys()];
    let failed = 0;
    const errorSamples = new Set<string>();
    const latencies: number[] = [];
    const inFlight = new Set<Promise<void>>();
    // As kube-scheduler does: scheduling cycles one after another, binds asynchronous.
    const t0 = performance.now();
    for (const pod of pods) {
      const start = performance.now();
      const offer = sample(names, BIND_OFFERED, rand);
      const f = (await call(app, '/filter', JSON.stringify({ Pod: pod, Nodes: null, NodeNames: offer }))) as {
        NodeNames: string[];
      };
      const scores = (await call(
        app,
        '/prioritize',
        JSON.stringify({ Pod: pod, Nodes: null, NodeNames: f.NodeNames }),
      )) as {
        Host: string;
        Score: number;
      }[];
      const best = scores.reduce((a, b) => (b.Score > a.Score ? b : a), scores[0] as { Host: string; Score: number });
      const body = JSON.stringify({
        PodName: pod.metadata?.name,
        PodNamespace: 'default',
        PodUID: pod.metadata?.uid,
        Node: best?.Host,
      });
      const bind: Promise<void> = call(app, '/bind', body).then((r) => {
        const error = (r as { Error: string }).Error;
        if (error) {
          failed++;
          if (errorSamples.size < 5) errorSamples.add(error.replace(/p\d+/, 'pN').replace(/node-\d+/, 'node-N'));
        }
        latencies.push(performance.now() - start);
        inFlight.delete(bind);
      });
      inFlight.add(bind);
      if (inFlight.size >= IN_FLIGHT) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    const seconds = (performance.now() - t0) / 1000;
    // A bind answers before its confirm commits: the few confirms still queued are not in the rate.
    await confirms.drain();
    const roundTrips = (calls.reserve + calls.confirmMany + calls.other) / BIND_PODS;
    log(`ledger calls: ${calls.reserve} reserve, ${calls.confirmMany} confirmMany, ${calls.other} other`);
    const rate = (BIND_PODS - failed) / seconds;
    latencies.sort((a, b) => a - b);
    for (const e of errorSamples) log(`  bind error (kube-scheduler would retry): ${e}`);
    log(
      `${BIND_PODS} pods in ${seconds.toFixed(2)} s (${failed} bind errors) on ${kind}${grouped ? ', group commit' : ''}: ${rate.toFixed(0)} pods/s`,
    );
    const ledgerKind = kind === 'postgres' ? 'local PostgreSQL' : 'PGlite';
    if (grouped) {
      return [
        {
          name: 'binds_per_s_grouped',
          value: Math.round(rate),
          unit: 'pods/s',
          scenario: `same, the ledger with group commit, on ${ledgerKind}`,
        },
        { name: 'bind_errors_grouped', value: failed, unit: 'pods', scenario: `of ${BIND_PODS}, group commit` },
        {
          name: 'ledger_calls_per_bind_grouped',
          value: Number(roundTrips.toFixed(2)),
          unit: 'calls',
          scenario: 'reserve + confirm statements per bind (group commit batches reserves inside the ledger)',
        },
      ];
    }
    return [
      {
        name: 'binds_per_s',
        value: Math.round(rate),
        unit: 'pods/s',
        ...atLeast(rate, 1000),
        scenario: `filter->prioritize->bind, ${IN_FLIGHT} in flight, ledger on ${ledgerKind}`,
      },
      { name: 'bind_cycle_p99_ms', value: percentile(latencies, 99), unit: 'ms', scenario: 'one pod, filter to bound' },
      { name: 'bind_errors', value: failed, unit: 'pods', scenario: `of ${BIND_PODS}` },
      {
        name: 'ledger_calls_per_bind',
        value: Number(roundTrips.toFixed(2)),
        unit: 'calls',
        scenario: 'ledger round trips per bind: one reserve, and confirms batched with the binds finishing meanwhile',
      },
      {
        name: 'ledger_node_registration_ms',
        value: Math.round(registrationMs),
        unit: 'ms',
        scenario: `${BIND_NODES} nodes x ${CARDS} GPUs registered before the binds (once per node, at start)`,
      },
    ];
  } finally {
    await tdb.drop();
  }
}

/** The client name on kube-scheduler's certificate, the one name the listeners let in. */
const SCHEDULER_CLIENT = 'kube-scheduler';
const HTTPS_PODS = Number(process.env.VCUDA_BENCH_HTTPS_PODS ?? 2000);

type DriverResult = { seconds: number; failed: number; errors: string[]; cycleMs: number[]; bindMs: number[] };
type DriverPod = { name: string; namespace: string; uid: string; pod: PodWithStatus; offer: string[] };

/**
 * An extender that does nothing: filter keeps every offered node, prioritize scores them all 0,
 * bind posts the Binding alone (no cards, ledger, signature or Event). The same listener, client
 * certificate gate and body limit as the real one, so it is the ceiling of the transport.
 */
function doNothingExtender(kube: ReturnType<typeof createLocalKube>): Hono {
  const app = new Hono();
  const offered = async (req: Request) => ((await req.json()) as { NodeNames?: string[] | null }).NodeNames ?? [];
  app.post('/filter', async (c) =>
    c.json({
      Nodes: null,
      NodeNames: await offered(c.req.raw),
      FailedNodes: {},
      FailedAndUnresolvableNodes: {},
      Error: '',
    }),
  );
  app.post('/prioritize', async (c) => c.json((await offered(c.req.raw)).map((Host) => ({ Host, Score: 0 }))));
  app.post('/bind', async (c) => {
    const b = (await c.req.json()) as { PodName: string; PodNamespace: string; PodUID: string; Node: string };
    try {
      await kube.bindPod(b.PodNamespace, b.PodName, b.PodUID, b.Node, {});
      return c.json({ Error: '' });
    } catch (err) {
      return c.json({ Error: String(err) });
    }
  });
  return app;
}

/** Serves `verbs` as the control plane serves the extender (HTTPS, HTTP/2, mTLS) and drives it from a thread of its own. */
async function driveOverHttps(
  verbs: Hono,
  tls: { listener: { cert: string; key: string; ca: string }; client: ExtenderClientCredentials },
  pods: DriverPod[],
): Promise<DriverResult> {
  const guarded = guardedExtender(verbs, { allowedClients: [SCHEDULER_CLIENT], maxBodyBytes: 16 << 20 });
  const served = await listen(new Hono().route('/scheduler', guarded), '127.0.0.1', 0, tls.listener);
  try {
    const worker = new Worker(new URL('./extender-driver.mjs', import.meta.url), {
      workerData: { url: served.url, tls: tls.client, pods, inFlight: IN_FLIGHT },
    });
    const result = await new Promise<DriverResult & { error?: string }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    if (result.error) throw new Error(`extender driver: ${result.error}`);
    return result;
  } finally {
    await served.close();
  }
}

/** A fresh cluster of BIND_NODES empty nodes holding `pods`, unbound, and the offers a scheduler would make. */
function bindCluster(prefix: string, seed: number) {
  const rand = seeded(seed);
  const state = testState();
  for (let i = 0; i < BIND_NODES; i++) state.upsertNode(gpuNode({ name: `node-${i}`, cards: CARDS }));
  const shapes = [10, 20, 30, 40, 50, 60, 100];
  const names = [...state.snapshot().nodes.keys()];
  const pods: DriverPod[] = Array.from({ length: HTTPS_PODS }, (_, i) => {
    const core = shapes[i % shapes.length] as number;
    const pod = gpuPod(`${prefix}${i}`, [core === 100 ? { core } : { core, memoryMiB: core * 512 }]);
    state.upsertPod(pod);
    const meta = pod.metadata as { name: string; uid: string };
    return { name: meta.name, namespace: 'default', uid: meta.uid, pod, offer: sample(names, BIND_OFFERED, rand) };
  });
  return { state, pods };
}

/**
 * binds_per_s over the real transport beside its ceiling in the same run: the do-nothing extender,
 * then the real one (ledger on local PostgreSQL, else PGlite), then the do-nothing one again.
 */
async function measureBindsOverHttps(log: (s: string) => void): Promise<Figure[]> {
  const tls = await issueEphemeralExtenderTls(
    { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] },
    SCHEDULER_CLIENT,
    { validityDays: 2, rotateBeforeDays: 1 },
    new Date(),
  );
  const ceilingRun = async (round: number) => {
    const { state, pods } = bindCluster(`c${round}-`, 11);
    const r = await driveOverHttps(doNothingExtender(createLocalKube(state)), tls, pods);
    log(`do-nothing extender over HTTPS: ${HTTPS_PODS} pods in ${r.seconds.toFixed(2)} s (${r.failed} bind errors)`);
    return r;
  };
  const kind = (await isPostgresReachable()) ? 'postgres' : 'pglite';
  const tdb: TestDatabase = await createTestDatabase(kind);
  try {
    const first = await ceilingRun(1);
    const db: VcudaDb = kind === 'postgres' ? await tdb.open(IN_FLIGHT) : tdb.db;
    const ledger = createLedger(db, { clock: () => TEST_NOW });
    const { state, pods } = bindCluster('r-', 11);
    const ledgerNodes = new LedgerNodes(ledger, 'bench');
    await ledgerNodes.ensureAll(state.snapshot().nodes.values());
    const confirms = new PodWriteBatcher((uids) => ledger.confirmMany('bench', uids));
    const app = makeApp(state, ledger, createAssignmentSigner(await testKeys(), 600), { ledgerNodes, confirms });
    // This thread is the control plane's event loop here (the scheduler runs in its own): what a
    // filter or prioritize waits behind while binds, their confirms and Events are under way.
    const lag = monitorEventLoopDelay({ resolution: 1 });
    lag.enable();
    const real = await driveOverHttps(app, tls, pods);
    lag.disable();
    await confirms.drain();
    const lagP99 = lag.percentile(99) / 1e6;
    for (const e of real.errors) log(`  bind error (kube-scheduler would retry): ${e}`);
    log(`vcuda extender over HTTPS: ${HTTPS_PODS} pods in ${real.seconds.toFixed(2)} s (${real.failed} bind errors)`);
    const last = await ceilingRun(2);
    const rate = (HTTPS_PODS - real.failed) / real.seconds;
    const ceiling = (2 * HTTPS_PODS - first.failed - last.failed) / (first.seconds + last.seconds);
    const ratio = rate / ceiling;
    const scenario = `${HTTPS_PODS} pods, ${BIND_NODES} nodes, HTTP/2 + mTLS from a scheduler thread, ${IN_FLIGHT} binds in flight`;
    const ceilingScenario = `${scenario}; do-nothing extender (every node kept, Binding alone), mean of before and after`;
    return [
      {
        name: 'binds_per_s_https',
        value: Math.round(rate),
        unit: 'pods/s',
        scenario: `${scenario}, ledger on ${kind}`,
      },
      { name: 'binds_per_s_https_ceiling', value: Math.round(ceiling), unit: 'pods/s', scenario: ceilingScenario },
      { name: 'binds_over_ceiling', value: Number(ratio.toFixed(3)), unit: 'ratio', scenario, ...atLeast(ratio, 0.5) },
      { name: 'bind_errors_https', value: real.failed, unit: 'pods', scenario: `of ${HTTPS_PODS}` },
      {
        name: 'event_loop_lag_p99_ms_https',
        value: lagP99,
        unit: 'ms',
        scenario: `${scenario}: the extender's event loop during the burst`,
        ...atMost(lagP99, 10),
      },
      {
        name: 'event_loop_lag_max_ms_https',
        value: lag.max / 1e6,
        unit: 'ms',
        scenario: `${scenario}: the extender's event loop during the burst`,
      },
      { name: 'bind_call_p99_ms_https', value: percentile(real.bindMs, 99), unit: 'ms', scenario },
      {
        name: 'bind_call_p99_ms_https_ceiling',
        value: percentile(first.bindMs, 99),
        unit: 'ms',
        scenario: ceilingScenario,
      },
      {
        name: 'cycle_p99_ms_https',
        value: percentile(real.cycleMs, 99),
        unit: 'ms',
        scenario: `${scenario}: filter + prioritize as the scheduler waits for them`,
      },
      {
        name: 'cycle_p99_ms_https_ceiling',
        value: percentile(first.cycleMs, 99),
        unit: 'ms',
        scenario: ceilingScenario,
      },
    ];
  } finally {
    await tdb.drop();
  }
}

const bench: Benchmark = {
  name: 'extender',
  description:
    'Scheduler extender: filter+prioritize latency on 5,000 nodes x 8 GPUs, and pods/s through filter->prioritize->bind with the ledger on PostgreSQL.',
  async run({ log }) {
    // VCUDA_BENCH_EXTENDER_PARTS=filter,bind,grouped (default: all three) runs a part alone, e.g. to profile it.
    const parts = new Set((process.env.VCUDA_BENCH_EXTENDER_PARTS ?? 'filter,bind,grouped,https').split(','));
    return [
      ...(parts.has('filter') ? await measureFilterPrioritize(log) : []),
      ...(parts.has('bind') ? await measureBinds(log) : []),
      ...(parts.has('grouped') ? await measureBinds(log, true) : []),
      ...(parts.has('https') ? await measureBindsOverHttps(log) : []),
    ];
  },
};

export default bench;
