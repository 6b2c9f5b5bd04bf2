/**
 * Admission latency on the production path under a steady offered load: the real
 * `vcuda control-plane` process (its HTTPS admission listener, the ledger's quota pre-check on
 * every GPU pod, pino to stdout) answers the real 1.26 `share-30` AdmissionReview (about 6 KiB,
 * with managedFields) POSTed at a fixed rate, open loop, from a separate load-generator process
 * that keeps its HTTPS keep-alive connections as kube-apiserver does (webhook-load-generator.mjs).
 * With the ledger on local PostgreSQL and on embedded PGlite (the local-mode default), and, as the
 * same run's ceiling, a trivial node:https server answering a constant (webhook-ceiling-server.mjs)
 * under the same generator at the same rate: what TLS, HTTP and one Node thread cost on these
 * cores before any admission logic. The three are measured in interleaved rounds, so a neighbour's
 * burst on the shared machine lands on all of them alike.
 *
 * So that the cause of a tail is visible, each server process records (webhook-probe.mjs) its
 * collector pauses, event-loop delay, its main thread's wait for a CPU (kernel run-queue time) and
 * every request's server-side time; the generator records its own lateness and CPU waits; and the
 * machine's CPU is split into server, generator, PostgreSQL and everything else. Each request
 * slower than the target is set beside those intervals. A latency counts from when the request left
 * the generator, queueing for a busy connection included (`p99_from_due_ms` counts from when it
 * fell due, the generator's ~1 ms timer slack and its own stalls included).
 * Before the rounds, with no review coming in, the CPU of the control plane holding the dashboard
 * streams is read beside the one holding none (`idle_cpu_ms_per_s`): what the streams cost alone.
 * `VCUDA_BENCH_WEBHOOK_SECONDS` (default 10) sets each figure's measured time;
 * `VCUDA_BENCH_WEBHOOK_CPU_PROF=DIR` writes the control planes' CPU profiles there (see
 * cpu-profile-summary.ts).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { Agent, get } from 'node:http';
import { request } from 'node:https';
import { cpus, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import postgres from 'postgres';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { createTestDatabase, isPostgresReachable } from '../support/db/test-databases.js';
import { atMost, type Benchmark, type Figure, freeLoopbackPort, percentile } from './harness.js';

const RATE_PER_S = 2000;
/** Each server's first warm-up (JIT, connections), then a short one before each of its rounds. */
const FIRST_WARMUP_MS = 3000;
const ROUND_WARMUP_MS = 1000;
const ROUNDS = 2;
const MEASURE_MS = Number(process.env.VCUDA_BENCH_WEBHOOK_SECONDS ?? 10) * 1000;
const TARGET_P99_MS = 3;
const CLUSTER = 'bench';
const PATH = '/admission/mutate?timeout=5s';
/** A revision (`VCUDA_BENCH_WEBHOOK_BASELINE=HEAD~1`) whose control plane on PostgreSQL joins the rounds (_baseline). */
const BASELINE_REV = process.env.VCUDA_BENCH_WEBHOOK_BASELINE;
/**
 * A nice value (`VCUDA_BENCH_WEBHOOK_PRIORITY=-10`) for every thread of the servers and the
 * generator once warm: an experiment on a shared machine, what the code holds when it gets the CPU
 * it asks for ahead of the neighbours' work, as a pod's CPU request gets it on a node.
 */
const PRIORITY = process.env.VCUDA_BENCH_WEBHOOK_PRIORITY;
/** Dashboard streams held open on the `_sse` control plane while its reviews are measured. */
const SSE_STREAMS = Number(process.env.VCUDA_BENCH_WEBHOOK_STREAMS ?? 300);
/** `VCUDA_BENCH_WEBHOOK_PGLITE=0` leaves the PGlite control plane out (a shorter run). */
const WITH_PGLITE = process.env.VCUDA_BENCH_WEBHOOK_PGLITE !== '0';

type ProbeReport = {
  elapsedMs: number;
  gcPauses: [number, number, string][];
  loopDelayMs: { p50: number; p99: number; max: number };
  cpuWaits: [number, number, number][];
  mainThreadCpuMs: number;
  mainThreadWaitMs: number;
  processCpuMs: number;
  elu: number;
  serverMs: number[];
  heapUsedMiB: number;
};
type LoadResult = {
  latenciesMs: number[];
  lateMs: number[];
  /** [sent, answered] epoch ms and how late the generator sent it. */
  slow: [number, number, number][];
  errors: number;
  retries: number;
  sent: number;
  elapsedMs: number;
  connectionsOpened: number;
  connections: number;
  cpuWaits: [number, number, number][];
  mainThreadWaitMs: number;
  processCpuMs: number;
  elu: number;
  loopDelayMs: { p99: number; max: number };
};
/** Whole-machine counters over one measured round. */
type MachineSample = { busyCores: number; postgresCores: number; cpuPressure: number; postgresXacts: number };

/** `postgres`: its ledger is on the PostgreSQL database (whose transactions and CPU are counted). */
type Server = {
  key: string;
  label: string;
  child: ChildProcess;
  port: number;
  postgres: boolean;
  logFile?: string;
  /** The plain-HTTP port (dashboard, metrics) of a control plane. */
  httpPort?: number;
};

function onMessage<T>(child: ChildProcess, match: (m: unknown) => m is T): Promise<T> {
  return new Promise((resolve, reject) => {
    const exited = (code: number | null) => reject(new Error(`${child.spawnargs.join(' ')} exited with ${code}`));
    const listener = (m: unknown) => {
      if (!match(m)) return;
      child.off('message', listener);
      child.off('exit', exited);
      resolve(m);
    };
    child.on('message', listener);
    child.once('exit', exited);
  });
}

function startGenerator(root: string, bodies: string[]) {
  const child = spawn(process.execPath, [join(root, 'test/bench/webhook-load-generator.mjs')], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  child.send({ cmd: 'init', bodies });
  const isResult =
    (id: string) =>
    (m: unknown): m is { id: string; result: LoadResult } =>
      (m as { id?: string }).id === id && 'result' in (m as object);
  return {
    target: (id: string, port: number, ca: string) => child.send({ cmd: 'target', id, port, ca, path: PATH }),
    run: async (id: string, s: { durationMs: number; ratePerS?: number; concurrency?: number }) => {
      const reply = onMessage(child, isResult(id));
      child.send({ cmd: 'run', id, slowMs: TARGET_P99_MS, ...s });
      return (await reply).result;
    },
    pid: child.pid,
    stop: () => child.kill(),
  };
}

/**
 * Every thread of the processes at `nice`, and their scheduling autogroup too (with autogroups, a
 * thread's nice orders it only within its session's group, and each session's group gets an equal
 * share of the cores). Returns what puts the autogroup back.
 */
function prioritize(pids: readonly (number | undefined)[], nice: number): () => void {
  for (const pid of pids) {
    if (pid === undefined) continue;
    for (const tid of readdirSync(`/proc/${pid}/task`)) setPriority(Number(tid), nice);
  }
  const group = `/proc/${pids.find((p) => p !== undefined)}/autogroup`;
  let before: string | undefined;
  try {
    before = /nice (-?\d+)/.exec(readFileSync(group, 'latin1'))?.[1];
    writeFileSync(group, String(nice));
  } catch {
    return () => undefined;
  }
  return () => {
    if (before !== undefined) writeFileSync(group, before);
  };
}

/** Starts recording in a server process; the returned function stops it and gives the report. */
async function probe(server: Server): Promise<() => Promise<ProbeReport>> {
  server.child.send({ probe: 'start' });
  return async () => {
    const isReport = (m: unknown): m is { report: ProbeReport } => (m as { probe?: string }).probe === 'report';
    const reply = onMessage(server.child, isReport);
    server.child.send({ probe: 'stop' });
    return (await reply).report;
  };
}

/** Resolves once a TLS handshake on the port succeeds (the control plane takes seconds to start). */
async function waitForTls(port: number, ca: string, child: ChildProcess, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode} before listening`);
    const up = await new Promise<boolean>((resolve) => {
      const s = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
        s.end();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`nothing answered TLS on port ${port} within ${timeoutMs} ms`);
}

/**
 * The production build (`npm run build`, what the image runs: tsc's output, not tsx's on-the-fly
 * transform) in a folder of its own inside the checkout, where it finds node_modules.
 */
function buildDist(root: string, rev?: string): string {
  const out = mkdtempSync(join(root, '.vcuda', 'webhook-bench-dist-'));
  if (!rev) {
    execFileSync(process.execPath, [join(root, 'deploy/build-dist.mjs'), '--out', out], { stdio: 'inherit' });
    return out;
  }
  // Another revision: its files beside this checkout's node_modules, built by its own script.
  const src = `${out}-src`;
  mkdirSync(src);
  try {
    execFileSync('sh', ['-c', 'git archive "$1" | tar -x -C "$2"', 'sh', rev, src], { cwd: root, stdio: 'inherit' });
    symlinkSync(join(root, 'node_modules'), join(src, 'node_modules'));
    execFileSync(process.execPath, [join(src, 'deploy/build-dist.mjs'), '--out', out], { stdio: 'inherit' });
  } finally {
    rmSync(src, { recursive: true, force: true });
  }
  return out;
}

/** `vcuda control-plane` as the image runs it, with the probe preloaded and pino's stdout in a file. */
async function startControlPlaneProcess(
  { root, dist, dir }: { root: string; dist: string; dir: string },
  scenario: { key: string; label: string; database: Record<string, string> },
  tls: { certFile: string; keyFile: string; caFile: string; ca: string },
): Promise<Server> {
  const httpsPort = await freeLoopbackPort();
  const httpPort = await freeLoopbackPort();
  const configFile = join(dir, `control-plane${scenario.key}.json`);
  const config = {
    host: '127.0.0.1',
    port: httpPort,
    // Room for the streams the `_sse` scenario opens, all from this host (the defaults cap them
    // at 64 per replica and 8 per client address).
    dashboard: { maxStreams: SSE_STREAMS + 16, maxStreamsPerClient: SSE_STREAMS + 16 },
    httpsPort,
    clusterName: CLUSTER,
    extender: { port: 0 },
    kube: { mode: 'none' },
    signingKeys: { source: 'ephemeral' },
    database: scenario.database,
    webhook: { certificates: { mode: 'files', certFile: tls.certFile, keyFile: tls.keyFile, caFile: tls.caFile } },
    logLevel: 'info',
  };
  writeFileSync(configFile, JSON.stringify(config));
  const logFile = join(dir, `control-plane${scenario.key}.log`);
  const out = openSync(logFile, 'a');
  const profDir = process.env.VCUDA_BENCH_WEBHOOK_CPU_PROF;
  const nodeArgs = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      '--import',
      join(root, 'test/bench/webhook-probe.mjs'),
      join(dist, 'cli/main.js'),
      'control-plane',
      '--config',
      configFile,
    ],
    { stdio: ['ignore', out, 'inherit', 'ipc'], env: { ...process.env, VCUDA_INSTANCE_ID: 'bench' } },
  );
  closeSync(out);
  await waitForTls(httpsPort, tls.ca, child);
  const postgres = scenario.database.url !== undefined;
  return { key: scenario.key, label: scenario.label, child, port: httpsPort, postgres, logFile, httpPort };
}

async function startCeilingServer(root: string, dir: string, answer: string): Promise<Server> {
  const answerFile = join(dir, 'answer.json');
  writeFileSync(answerFile, answer);
  const child = spawn(
    process.execPath,
    [
      '--import',
      join(root, 'test/bench/webhook-probe.mjs'),
      join(root, 'test/bench/webhook-ceiling-server.mjs'),
      join(dir, 'tls.key'),
      join(dir, 'tls.crt'),
      answerFile,
    ],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  const isPort = (m: unknown): m is { port: number } => typeof (m as { port?: number }).port === 'number';
  const { port } = await onMessage(child, isPort);
  const label = 'constant answer from a plain node:https server (ceiling)';
  return { key: '_ceiling', label, child, port, postgres: false };
}

async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  const timer = setTimeout(() => server.child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** One review POSTed with node:https: the control plane's real answer, which the ceiling then repeats. */
function postOnce(port: number, ca: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: PATH,
        method: 'POST',
        ca,
        servername: 'localhost',
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => (res.statusCode === 200 ? resolve(text) : reject(new Error(`${res.statusCode}: ${text}`))));
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

// Machine counters: /proc/stat's busy jiffies (steal included), every postgres process's CPU
// (the server and every backend, other users' included), and the kernel's CPU pressure (the share
// of time some runnable task waited for a core).
const HZ = 100;

/** Busy and all jiffies of every core so far. */
function machineJiffies(): { busy: number; all: number } {
  const f = (readFileSync('/proc/stat', 'latin1').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, all: busy + idle + iowait };
}

/** utime + stime of a /proc/PID/stat line (the fields after the command's closing parenthesis). */
function jiffiesOfStat(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** CPU jiffies of every postgres process now, by pid. */
function postgresJiffies(): Map<string, number> {
  const byPid = new Map<string, number>();
  for (const pid of readdirPids()) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'postgres') continue;
      byPid.set(pid, jiffiesOfStat(stat));
    } catch {
      // The process ended between listing and reading.
    }
  }
  return byPid;
}

/** What the postgres processes alive at the end used in between (a backend that ended is not counted). */
function postgresJiffiesBetween(before: Map<string, number>, after: Map<string, number>): number {
  let total = 0;
  for (const [pid, jiffies] of after) {
    const since = jiffies - (before.get(pid) ?? 0);
    // Less than before: the pid was reused by a new backend, all of whose time is in between.
    total += since >= 0 ? since : jiffies;
  }
  return total;
}

function readdirPids(): string[] {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n));
}

function cpuPressureUs(): number {
  try {
    return Number(/some .*total=(\d+)/.exec(readFileSync('/proc/pressure/cpu', 'latin1'))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
}

async function machineCounters(sql: postgres.Sql | undefined, dbName: string) {
  const xacts = sql
    ? Number((await sql`select xact_commit + xact_rollback as n from pg_stat_database where datname = ${dbName}`)[0]?.n)
    : 0;
  return { at: performance.now(), cpu: machineJiffies(), pg: postgresJiffies(), psi: cpuPressureUs(), xacts };
}

function machineSample(
  a: Awaited<ReturnType<typeof machineCounters>>,
  b: Awaited<ReturnType<typeof machineCounters>>,
): MachineSample {
  const seconds = (b.at - a.at) / 1000;
  return {
    // The share of all cores' accounted time that was busy, as cores.
    busyCores: (cpus().length * (b.cpu.busy - a.cpu.busy)) / Math.max(1, b.cpu.all - a.cpu.all),
    postgresCores: postgresJiffiesBetween(a.pg, b.pg) / HZ / seconds,
    cpuPressure: (b.psi - a.psi) / 1e6 / seconds,
    // The counters' own query is one transaction.
    postgresXacts: Math.max(0, b.xacts - a.xacts - 1),
  };
}

type Round = { load: LoadResult; server: ProbeReport; machine: MachineSample; logLines: number };

const countLines = (file: string | undefined) => (file ? readFileSync(file, 'latin1').split('\n').length - 1 : 0);

async function measureRound(
  gen: ReturnType<typeof startGenerator>,
  server: Server,
  pg: { sql: postgres.Sql; dbName: string },
  durationMs: number,
): Promise<Round> {
  await gen.run(server.key, { durationMs: ROUND_WARMUP_MS, ratePerS: RATE_PER_S });
  const sql = server.postgres ? pg.sql : undefined;
  const linesBefore = countLines(server.logFile);
  const before = await machineCounters(sql, pg.dbName);
  const stopProbe = await probe(server);
  const load = await gen.run(server.key, { durationMs, ratePerS: RATE_PER_S });
  const report = await stopProbe();
  const after = await machineCounters(sql, pg.dbName);
  return {
    load,
    server: report,
    machine: machineSample(before, after),
    logLines: countLines(server.logFile) - linesBefore,
  };
}

/** How much of [from, to] the intervals cover, each weighted by what it held (default: its length). */
function overlapMs(from: number, to: number, intervals: readonly (readonly [number, number, ...unknown[]])[]): number {
  let total = 0;
  for (const i of intervals) {
    const [a, b] = i;
    const covered = Math.min(to, b) - Math.max(from, a);
    if (covered <= 0) continue;
    const weight = typeof i[2] === 'number' ? i[2] / Math.max(b - a, 1e-6) : 1;
    total += covered * weight;
  }
  return total;
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const mean = (xs: readonly number[]) => sum(xs) / Math.max(1, xs.length);
const sorted = (xs: readonly number[]) => [...xs].sort((a, b) => a - b);

/** A slow request is put down to what held it longest while it was out, when that was 1 ms or more. */
const CAUSE_MIN_MS = 1;

/**
 * Why each request over the target was slow: of the server's collector pauses, the server
 * thread's wait for a CPU and the generator thread's wait for a CPU (which reads the answer late)
 * within the request's time, the largest; none of them reaching 1 ms leaves the server's own work
 * (the request queued behind others, or a slow step of its own).
 */
function explainSlow(rounds: readonly Round[]) {
  const causes = { gc: 0, serverWait: 0, generator: 0, serverWork: 0, total: 0 };
  for (const { load, server } of rounds) {
    for (const [sent, answered] of load.slow) {
      causes.total++;
      const held = {
        gc: overlapMs(
          sent,
          answered,
          server.gcPauses.map(([a, b]) => [a, b] as const),
        ),
        serverWait: overlapMs(sent, answered, server.cpuWaits),
        generator: overlapMs(sent, answered, load.cpuWaits),
      };
      const [cause, ms] = Object.entries(held).sort((x, y) => y[1] - x[1])[0] as [keyof typeof held, number];
      if (ms >= CAUSE_MIN_MS) causes[cause]++;
      else causes.serverWork++;
    }
  }
  return causes;
}

function scenarioFigures(server: Server, rounds: readonly Round[], target: boolean): Figure[] {
  const latencies = sorted(rounds.flatMap((r) => r.load.latenciesMs));
  const fromDue = sorted(rounds.flatMap((r) => r.load.latenciesMs.map((l, i) => l + (r.load.lateMs[i] ?? 0))));
  const serverMs = sorted(rounds.flatMap((r) => r.server.serverMs));
  const late = sorted(rounds.flatMap((r) => r.load.lateMs));
  const gcMs = rounds.flatMap((r) => r.server.gcPauses.map(([a, b]) => b - a));
  const seconds = sum(rounds.map((r) => r.load.elapsedMs)) / 1000;
  const reviews = Math.max(1, latencies.length);
  const slow = explainSlow(rounds);
  const p99 = percentile(latencies, 99);
  const priority = PRIORITY === undefined ? '' : `, nice ${PRIORITY}`;
  const scenario = `share-30 mutate, ${RATE_PER_S} req/s, HTTPS keep-alive, ${server.label}${priority}`;
  const f = (name: string, value: number, unit: string, extra: Partial<Figure> = {}): Figure => ({
    name: `${name}${server.key}`,
    value,
    unit,
    scenario,
    ...extra,
  });
  const slowScenario = (what: string) => ({ scenario: `${scenario}, over ${TARGET_P99_MS} ms, ${what}` });
  const m = (pick: (s: MachineSample) => number) => mean(rounds.map((r) => pick(r.machine)));
  const serverCores = sum(rounds.map((r) => r.server.processCpuMs)) / 1000 / seconds;
  const generatorCores = sum(rounds.map((r) => r.load.processCpuMs)) / 1000 / seconds;
  const pgCores = server.postgres ? m((s) => s.postgresCores) : 0;
  return [
    f('p99_ms', p99, 'ms', target ? atMost(p99, TARGET_P99_MS) : {}),
    f('p50_ms', percentile(latencies, 50), 'ms'),
    f('p999_ms', percentile(latencies, 99.9), 'ms'),
    f('max_ms', latencies[latencies.length - 1] ?? Number.NaN, 'ms'),
    // Counted from when each request fell due: the generator's own timer slack included.
    f('p99_from_due_ms', percentile(fromDue, 99), 'ms'),
    f('server_side_p99_ms', percentile(serverMs, 99), 'ms'),
    f('server_side_max_ms', serverMs[serverMs.length - 1] ?? Number.NaN, 'ms'),
    f('achieved_rps', Math.round(latencies.length / seconds), 'req/s'),
    f('server_event_loop_utilization', mean(rounds.map((r) => r.server.elu)), 'ratio'),
    f('server_cpu_us_per_review', Math.round((serverCores * seconds * 1e6) / reviews), 'us'),
    f('server_loop_delay_p99_ms', Math.max(...rounds.map((r) => r.server.loopDelayMs.p99)), 'ms'),
    f('server_loop_delay_max_ms', Math.max(...rounds.map((r) => r.server.loopDelayMs.max)), 'ms'),
    f('server_gc_pause_max_ms', Math.max(0, ...gcMs), 'ms'),
    f('server_gc_total_ms', sum(gcMs), 'ms'),
    // Full mark-compacts: their pause grows with the heap (PGlite's included), not with the rate.
    f(
      'server_gc_major_count',
      rounds.flatMap((r) => r.server.gcPauses.filter((p) => p[2] === 'major')).length,
      'pauses',
    ),
    f(
      'server_gc_major_max_ms',
      Math.max(0, ...rounds.flatMap((r) => r.server.gcPauses.filter((p) => p[2] === 'major').map(([a, b]) => b - a))),
      'ms',
    ),
    f('server_heap_used_mib', Math.max(...rounds.map((r) => r.server.heapUsedMiB)), 'MiB'),
    // Time the server's main thread was ready to run while other processes held both cores.
    f('server_cpu_wait_ms', sum(rounds.map((r) => r.server.mainThreadWaitMs)), 'ms'),
    f('server_log_lines', sum(rounds.map((r) => r.logLines)), 'lines'),
    f('generator_late_p99_ms', percentile(late, 99), 'ms'),
    f('generator_cpu_wait_ms', sum(rounds.map((r) => r.load.mainThreadWaitMs)), 'ms'),
    f('generator_event_loop_utilization', mean(rounds.map((r) => r.load.elu)), 'ratio'),
    f('connections_opened', sum(rounds.map((r) => r.load.connectionsOpened)), 'connections'),
    f(
      'machine_busy_cores',
      m((s) => s.busyCores),
      'cores',
    ),
    f('server_cores', serverCores, 'cores'),
    f('generator_cores', generatorCores, 'cores'),
    ...(server.postgres
      ? [
          f('postgres_cores', pgCores, 'cores'),
          f('postgres_transactions', sum(rounds.map((r) => r.machine.postgresXacts)), 'transactions'),
        ]
      : []),
    f('other_processes_cores', m((s) => s.busyCores) - serverCores - generatorCores - pgCores, 'cores'),
    f(
      'cpu_pressure',
      m((s) => s.cpuPressure),
      'ratio',
    ),
    f('slow_requests', slow.total, 'requests', slowScenario('all')),
    f(
      'slow_by_server_cpu_wait',
      slow.serverWait,
      'requests',
      slowScenario("mostly the server's thread waiting for a CPU"),
    ),
    f('slow_by_server_gc', slow.gc, 'requests', slowScenario("mostly the server's collector")),
    f(
      'slow_by_generator_stall',
      slow.generator,
      'requests',
      slowScenario("mostly the generator's thread waiting for a CPU"),
    ),
    f(
      'slow_by_server_work',
      slow.serverWork,
      'requests',
      slowScenario('none of those 1 ms or more: the server itself'),
    ),
    f('retries', sum(rounds.map((r) => r.load.retries)), 'requests'),
    f('errors', sum(rounds.map((r) => r.load.errors)), 'requests', {
      target: `0 of ${sum(rounds.map((r) => r.load.sent))}`,
      pass: rounds.every((r) => r.load.errors === 0),
    }),
  ];
}

/** The quotas the share-30 pod (namespace team-a) is checked against: its namespace's and its team's. */
async function seedQuotas(db: VcudaDb): Promise<void> {
  const ledger = createLedger(db, { clock: () => new Date() });
  await ledger.setQuota({
    name: 'q-team-a',
    scope: 'namespace',
    cluster: CLUSTER,
    namespace: 'team-a',
    coreLimit: 100_000,
    memoryLimitMiB: 100_000_000,
  });
  await ledger.setTeam('research', [{ cluster: CLUSTER, namespace: 'team-a' }]);
  await ledger.setQuota({
    name: 'research',
    scope: 'team',
    team: 'research',
    coreLimit: 100_000,
    memoryLimitMiB: 100_000_000,
  });
}

/** The pre-check's own query, one at a time in this process: what an uncached admission waits for. */
async function measurePrecheck(db: VcudaDb, key: string, label: string): Promise<Figure[]> {
  const ledger = createLedger(db, { clock: () => new Date() });
  const times: number[] = [];
  for (let i = 0; i < 500; i++) {
    const started = performance.now();
    await ledger.precheckQuota({ cluster: CLUSTER, namespace: 'team-a', core: 30, memoryMiB: 8192 });
    if (i >= 50) times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const scenario = `ledger.precheckQuota alone, one at a time, ${label}`;
  return [
    { name: `precheck_p50_ms${key}`, value: percentile(times, 50), unit: 'ms', scenario },
    { name: `precheck_p99_ms${key}`, value: percentile(times, 99), unit: 'ms', scenario },
  ];
}

function longestGc(report: ProbeReport): string {
  const [a = 0, b = 0, kind = 'none'] = [...report.gcPauses].sort((x, y) => y[1] - y[0] - (x[1] - x[0]))[0] ?? [];
  return `${(b - a).toFixed(1)} ms ${kind}`;
}

function logRound(log: (line: string) => void, server: Server, round: Round): void {
  const l = sorted(round.load.latenciesMs);
  const s = sorted(round.server.serverMs);
  log(
    `  ${server.label}: p50 ${percentile(l, 50).toFixed(2)} p99 ${percentile(l, 99).toFixed(2)} max ${(l[l.length - 1] ?? 0).toFixed(1)} ms` +
      ` | server-side p99 ${percentile(s, 99).toFixed(2)} | loop delay p99 ${round.server.loopDelayMs.p99.toFixed(2)} max ${round.server.loopDelayMs.max.toFixed(1)}` +
      ` | server cpu wait ${round.server.mainThreadWaitMs.toFixed(0)} ms, gc ${sum(round.server.gcPauses.map(([a, b]) => b - a)).toFixed(0)} ms (longest ${longestGc(round.server)})` +
      ` | cores: machine ${round.machine.busyCores.toFixed(2)}, server ${(round.server.processCpuMs / round.load.elapsedMs).toFixed(2)}, generator ${(round.load.processCpuMs / round.load.elapsedMs).toFixed(2)}; pressure ${round.machine.cpuPressure.toFixed(2)}`,
  );
}

async function prepareDatabases(dir: string) {
  const pg = await createTestDatabase('postgres');
  const liteDir = join(dir, 'pglite');
  const lite = await connectDb({ dataDir: liteDir });
  try {
    await migrate(lite);
    for (const db of [pg.db, lite]) await seedQuotas(db);
    const figures = [
      ...(await measurePrecheck(pg.db, '', 'PostgreSQL')),
      ...(await measurePrecheck(lite, '_pglite', 'PGlite')),
    ];
    return { pg, liteDir, figures };
  } finally {
    // The control plane opens the data directory itself.
    await closeDb(lite);
  }
}

type Setup = {
  root: string;
  dist: string;
  baselineDist?: string | undefined;
  dir: string;
  tls: Tls;
  pgUrl: string;
  liteDir: string;
  bodies: string[];
  /** The dashboard streams held open, closed at the end. */
  streams: { close: () => void; bytes: () => number }[];
};

/**
 * Opens `count` dashboard streams (GET /ui/stream, as open browser tabs do) on the control plane's
 * plain-HTTP port and resolves once every one has answered 200; they stay open until closed.
 */
async function openDashboardStreams(port: number, count: number): Promise<Setup['streams']> {
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const one = () =>
    new Promise<Setup['streams'][number]>((resolve, reject) => {
      const req = get({ host: '127.0.0.1', port, path: '/ui/stream', agent }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`dashboard stream: HTTP ${res.statusCode}`));
          return;
        }
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
        });
        res.on('error', () => undefined);
        resolve({ close: () => req.destroy(), bytes: () => bytes });
      });
      req.on('error', reject);
    });
  const streams = await Promise.all(Array.from({ length: count }, one));
  return streams;
}
type Tls = { certFile: string; keyFile: string; caFile: string; ca: string };

/** The ceiling, then the control plane on PostgreSQL, then on PGlite; each warmed up on its connections. */
async function startServers(setup: Setup, gen: ReturnType<typeof startGenerator>, servers: Server[]): Promise<void> {
  const { tls } = setup;
  const onPostgres = { key: '', label: 'ledger on PostgreSQL', database: { url: setup.pgUrl } };
  servers.push(await startControlPlaneProcess(setup, onPostgres, tls));
  const withStreams = {
    ...onPostgres,
    key: '_sse',
    label: `ledger on PostgreSQL, ${SSE_STREAMS} dashboard streams open`,
  };
  const sse = await startControlPlaneProcess(setup, withStreams, tls);
  servers.push(sse);
  setup.streams.push(...(await openDashboardStreams(sse.httpPort ?? 0, SSE_STREAMS)));
  const onPglite = { key: '_pglite', label: 'ledger on embedded PGlite', database: { dataDir: setup.liteDir } };
  if (WITH_PGLITE) servers.push(await startControlPlaneProcess(setup, onPglite, tls));
  if (setup.baselineDist) {
    const baseline = {
      key: '_baseline',
      label: `ledger on PostgreSQL, at ${BASELINE_REV}`,
      database: onPostgres.database,
    };
    servers.push(await startControlPlaneProcess({ ...setup, dist: setup.baselineDist }, baseline, tls));
  }
  const answer = await postOnce(servers[0]?.port ?? 0, tls.ca, setup.bodies[0] ?? '');
  servers.unshift(await startCeilingServer(setup.root, setup.dir, answer));
  for (const s of servers) {
    gen.target(s.key, s.port, tls.ca);
    await gen.run(s.key, { durationMs: FIRST_WARMUP_MS, ratePerS: RATE_PER_S });
  }
}

/** CPU jiffies (user + system, every thread) of one process so far. */
function processJiffies(pid: number | undefined): number {
  return jiffiesOfStat(readFileSync(`/proc/${pid}/stat`, 'latin1'));
}

const IDLE_MS = 10_000;

/**
 * What the dashboard streams cost with no review coming in: the CPU of the control plane holding
 * them against the same one holding none, side by side over the same seconds.
 */
async function idleStreamCost(servers: readonly Server[], log: (line: string) => void): Promise<Figure[]> {
  const plain = servers.find((s) => s.key === '');
  const sse = servers.find((s) => s.key === '_sse');
  if (!plain || !sse) return [];
  const before = [processJiffies(plain.child.pid), processJiffies(sse.child.pid)];
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const [a, b] = [processJiffies(plain.child.pid), processJiffies(sse.child.pid)].map(
    (j, i) => (((j - (before[i] as number)) * 1000) / HZ / IDLE_MS) * 1000,
  ) as [number, number];
  log(
    `no reviews for ${IDLE_MS / 1000} s: control plane ${a.toFixed(1)} ms CPU per second, with ${SSE_STREAMS} streams ${b.toFixed(1)}`,
  );
  const scenario = `no reviews, ledger on PostgreSQL, ${IDLE_MS / 1000} s, CPU of every thread of the process`;
  return [
    { name: 'idle_cpu_ms_per_s', value: Number(a.toFixed(1)), unit: 'ms', scenario },
    {
      name: 'idle_cpu_ms_per_s_sse',
      value: Number(b.toFixed(1)),
      unit: 'ms',
      scenario: `${scenario}, ${SSE_STREAMS} dashboard streams open`,
    },
  ];
}

/** Interleaved rounds: a neighbour's burst lands on every server alike, not on one figure. */
async function measureServers(
  servers: readonly Server[],
  gen: ReturnType<typeof startGenerator>,
  pg: { sql: postgres.Sql; dbName: string },
  log: (line: string) => void,
): Promise<Figure[]> {
  const rounds = new Map<string, Round[]>(servers.map((s) => [s.key, []]));
  for (let r = 1; r <= ROUNDS; r++) {
    log(`round ${r} of ${ROUNDS}: ${MEASURE_MS / ROUNDS} ms at ${RATE_PER_S} req/s on each server`);
    for (const s of servers) {
      const round = await measureRound(gen, s, pg, MEASURE_MS / ROUNDS);
      logRound(log, s, round);
      rounds.get(s.key)?.push(round);
    }
  }
  const figures = servers.flatMap((s) => scenarioFigures(s, rounds.get(s.key) ?? [], s.key !== '_ceiling'));
  figures.push(...streamsOverWithout(rounds));
  // What the production process sustains right now, as fast as answers come back.
  const closed = await gen.run('', { durationMs: 3000, concurrency: 32 });
  figures.push({
    name: 'capacity_rps',
    value: Math.round(closed.latenciesMs.length / (closed.elapsedMs / 1000)),
    unit: 'req/s',
    scenario: 'share-30 mutate, closed loop, 32 in flight, HTTPS keep-alive, ledger on PostgreSQL',
  });
  return figures;
}

/** The review p99 of the control plane holding the dashboard streams over the same one without them, same rounds. */
function streamsOverWithout(rounds: Map<string, Round[]>): Figure[] {
  const p99 = (key: string) => percentile(sorted((rounds.get(key) ?? []).flatMap((r) => r.load.latenciesMs)), 99);
  const ratio = p99('_sse') / p99('');
  if (!Number.isFinite(ratio)) return [];
  return [
    {
      name: 'p99_with_streams_over_without',
      value: Number(ratio.toFixed(3)),
      unit: 'ratio',
      scenario: `share-30 mutate, ${RATE_PER_S} req/s, ledger on PostgreSQL: p99 with ${SSE_STREAMS} dashboard streams open over p99 without, same rounds`,
      ...atMost(ratio, 1.5),
    },
  ];
}

async function writeCertificates(dir: string): Promise<Tls> {
  const cert = await issueServingCertificate({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }, 2, new Date());
  const tls = {
    certFile: join(dir, 'tls.crt'),
    keyFile: join(dir, 'tls.key'),
    caFile: join(dir, 'ca.crt'),
    ca: cert.caPem,
  };
  writeFileSync(tls.certFile, cert.certPem);
  writeFileSync(tls.keyFile, cert.keyPem);
  writeFileSync(tls.caFile, cert.caPem);
  return tls;
}

const bench: Benchmark = {
  name: 'webhook',
  description: `Mutating admission on the production path (the \`vcuda control-plane\` process of the production build: its HTTPS listener, the ledger's quota pre-check, pino) of the real 1.26 share-30 pod at ${RATE_PER_S} req/s offered (open loop) from a separate load-generator process on kept-alive HTTPS connections; ledger on local PostgreSQL, then embedded PGlite (figures suffixed _pglite), a second one on PostgreSQL with ${SSE_STREAMS} dashboard SSE streams held open (_sse; target: its p99 at most 1.5 times the one without), beside a plain node:https server answering a constant under the same load (_ceiling), in interleaved rounds; with the servers' GC pauses, event-loop delay, CPU waits and server-side times, and the machine's CPU by process`,
  async run({ root, log }) {
    if (!(await isPostgresReachable())) throw new Error('the webhook benchmark needs PostgreSQL at 127.0.0.1:5432');
    const review = JSON.parse(
      readFileSync(join(root, 'webhooks/testdata/kubernetes-1.26/admission-mutate-create-share.json'), 'utf8'),
    );
    const bodies = Array.from({ length: 256 }, (_, i) => {
      review.request.uid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      return JSON.stringify(review);
    });
    mkdirSync(join(root, '.vcuda'), { recursive: true });
    const dist = buildDist(root);
    const baselineDist = BASELINE_REV ? buildDist(root, BASELINE_REV) : undefined;
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-webhook-bench-'));
    const tls = await writeCertificates(dir);
    const { pg, liteDir, figures } = await prepareDatabases(dir);
    const pgUrl = pg.url ?? '';
    const pgStats = { sql: postgres(pgUrl, { max: 1, onnotice: () => {} }), dbName: new URL(pgUrl).pathname.slice(1) };
    const servers: Server[] = [];
    const streams: Setup['streams'] = [];
    const gen = startGenerator(root, bodies);
    let restorePriority: () => void = () => undefined;
    try {
      await startServers({ root, dist, baselineDist, dir, tls, pgUrl, liteDir, bodies, streams }, gen, servers);
      if (PRIORITY !== undefined)
        restorePriority = prioritize([gen.pid, ...servers.map((s) => s.child.pid)], Number(PRIORITY));
      figures.push(...(await idleStreamCost(servers, log)));
      const streamedBefore = streams.reduce((a, st) => a + st.bytes(), 0);
      figures.push(...(await measureServers(servers, gen, pgStats, log)));
      const streamed = streams.reduce((a, st) => a + st.bytes(), 0) - streamedBefore;
      log(`${streams.length} dashboard streams open during the rounds received ${streamed} bytes in all`);
      return figures;
    } finally {
      for (const st of streams) st.close();
      restorePriority();
      gen.stop();
      for (const s of servers) await stopServer(s);
      await pgStats.sql.end({ timeout: 2 });
      await pg.drop();
      rmSync(dir, { recursive: true, force: true });
      for (const d of [dist, baselineDist]) if (d) rmSync(d, { recursive: true, force: true });
    }
  },
};

export default bench;
