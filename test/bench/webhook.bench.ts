/**
 * Admission latency on the production path under a steady offered load: the real control plane
 * (`startControlPlane`, as `vcuda control-plane` runs it: the HTTPS admission listener in front of
 * the app, the ledger's quota pre-check on every GPU pod, pino logging) answers the real 1.26
 * `share-30` AdmissionReview (about 6 KiB, with managedFields) POSTed over HTTPS keep-alive at a
 * fixed rate, open loop (each latency counts from the request's scheduled send time, so a stall
 * shows as the queue it causes). Twice: with the ledger on local PostgreSQL, and on embedded
 * PGlite (the local-mode default). The load generator is a separate Node process; the server's
 * process records its collector pauses and event-loop delay, and which slow requests overlapped a
 * pause, so the cause of a tail is visible. `VCUDA_BENCH_WEBHOOK_SECONDS` (default 10) sets the
 * measured phase.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { pino } from 'pino';
import { loadControlPlaneConfig } from '../../control-plane/config.js';
import { type RunningControlPlane, startControlPlane } from '../../control-plane/server.js';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { createTestDatabase, isPostgresReachable } from '../support/db/test-databases.js';
import { atMost, type Benchmark, type Figure, freeLoopbackPort, percentile } from './harness.js';

const RATE_PER_S = 2000;
const WARMUP_MS = 2000;
const MEASURE_MS = Number(process.env.VCUDA_BENCH_WEBHOOK_SECONDS ?? 10) * 1000;
const TARGET_P99_MS = 3;
const CLUSTER = 'bench';

type LoadResult = {
  latenciesMs: number[];
  /** Requests over the target, as [scheduled, answered] epoch ms. */
  slow: [number, number][];
  errors: number;
  /** Requests resent after the server closed an idle kept-alive connection under them. */
  retries: number;
  offered: number;
  elapsedMs: number;
  /** Busy share of the load generator's own thread. */
  generatorElu: number;
};

/**
 * The load generator, in plain JavaScript run by a child `node -e` (its settings arrive over IPC),
 * so its CPU and collector are not the webhook's: only the machine's cores are shared.
 */
const LOAD_GENERATOR = `
const tls = require('node:tls');
process.once('message', (workerData) => {
const { port, ca, path, bodies, durationMs, ratePerS, concurrency, slowMs } = workerData;
// Open loop: ratePerS for durationMs. Closed loop (concurrency set): as fast as answers come back.
const total = concurrency ? Infinity : Math.round((durationMs / 1000) * ratePerS);
const interval = 1000 / ratePerS;
const latenciesMs = [];
let errors = 0, sent = 0, done = 0;
const start = performance.now();
const eluStart = performance.eventLoopUtilization();
// A lean HTTP/1.1 client over TLS keep-alive, like the API server's pool (at most 64 connections,
// one request in flight on each, the rest queued): node:https's ClientRequest and IncomingMessage
// machinery cost this thread about as much CPU as the webhook itself, on the same 2 cores.
const MAX_SOCKETS = 64;
const requests = bodies.map((b) => {
  const body = Buffer.from(b);
  const head = 'POST ' + path + ' HTTP/1.1\\r\\nHost: 127.0.0.1:' + port +
    '\\r\\nContent-Type: application/json\\r\\nContent-Length: ' + body.length + '\\r\\n\\r\\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
});
const sockets = [], idle = [], waiting = [];
const CONTENT_LENGTH = /\\r\\ncontent-length: *(\\d+)/i;
let retries = 0;
// Requests slower than slowMs, as [scheduled, answered] in ms since the epoch, to set beside the
// server's collector pauses.
const slow = [];
const settle = (socket, ok) => {
  const now = performance.now();
  const latency = now - socket.job.scheduledAt;
  latenciesMs.push(latency);
  if (latency > slowMs) slow.push([performance.timeOrigin + socket.job.scheduledAt, performance.timeOrigin + now]);
  socket.job = undefined;
  if (!ok) errors++;
};
const connect = () => {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  socket.setNoDelay(true);
  socket.pending = null;
  sockets.push(socket);
  socket.on('data', (chunk) => {
    const buf = socket.pending ? Buffer.concat([socket.pending, chunk]) : chunk;
    const end = buf.indexOf('\\r\\n\\r\\n');
    const head = end < 0 ? '' : buf.toString('latin1', 0, end);
    const length = Number(CONTENT_LENGTH.exec(head)?.[1] ?? 0);
    if (end < 0 || buf.length < end + 4 + length) { socket.pending = buf; return; }
    socket.pending = null;
    socket.answered = true;
    settle(socket, head.startsWith('HTTP/1.1 200') && buf.toString('utf8', end + 4, end + 4 + length).includes('"allowed":true'));
    const next = waiting.shift();
    if (next) dispatch(socket, next); else idle.push(socket);
    finish();
  });
  const lost = () => {
    const i = idle.indexOf(socket);
    if (i >= 0) idle.splice(i, 1);
    sockets.splice(sockets.indexOf(socket), 1);
    if (socket.job === undefined) return;
    // The server closed a kept-alive connection (its idle timeout) as the request went out, and
    // nothing came back: resend once on another connection, as the API server's Go client does.
    if (!socket.job.retried && socket.pending === null && socket.answered) {
      const job = socket.job;
      job.retried = true;
      retries++;
      socket.job = undefined;
      return resend(job);
    }
    settle(socket, false);
    finish();
  };
  socket.once('close', lost);
  socket.on('error', () => {});
  return socket;
};
const dispatch = (socket, job) => { socket.job = job; socket.write(requests[job.index]); };
const send = (scheduledAt, n) => resend({ scheduledAt, index: n % requests.length, retried: false });
const resend = (job) => {
  const socket = idle.pop() ?? (sockets.length < MAX_SOCKETS ? connect() : undefined);
  if (socket) dispatch(socket, job); else waiting.push(job);
};
const finish = () => {
  done++;
  if (concurrency) {
    if (performance.now() - start < durationMs) return send(performance.now(), sent++);
    if (done < sent) return;
  } else if (done < total) return;
  for (const socket of [...sockets]) { socket.removeAllListeners('close'); socket.destroy(); }
  process.send({ latenciesMs, slow, errors, retries, offered: sent, elapsedMs: performance.now() - start,
    generatorElu: performance.eventLoopUtilization(eluStart).utilization }, () => process.exit(0));
};
// Timers fire about once a millisecond: send every request that is due, stamped with its due time.
const tick = () => {
  if (concurrency) {
    for (; sent < concurrency; sent++) send(performance.now(), sent);
    return;
  }
  const now = performance.now();
  while (sent < total && start + sent * interval <= now) {
    send(start + sent * interval, sent);
    sent++;
  }
  if (sent < total) setTimeout(tick, 1);
};
tick();
});
`;

type LoadSettings = {
  port: number;
  ca: string;
  path: string;
  bodies: string[];
  durationMs: number;
  ratePerS?: number;
  concurrency?: number;
};

function runLoad(settings: LoadSettings): Promise<LoadResult> {
  const child = spawn(process.execPath, ['-e', LOAD_GENERATOR], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise<LoadResult>((resolve, reject) => {
    child.once('message', (m) => resolve(m as LoadResult));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`load generator exited with ${code} before reporting`)));
    child.send({ ...settings, slowMs: TARGET_P99_MS });
  }).finally(() => child.kill());
}

/** Collector pauses of this (the server's) process, as [start, end] epoch ms. */
function watchGc(): { pauses: [number, number][]; stop: () => void } {
  const pauses: [number, number][] = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const start = performance.timeOrigin + e.startTime;
      pauses.push([start, start + e.duration]);
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return { pauses, stop: () => observer.disconnect() };
}

const overlaps = (a: [number, number], b: [number, number]) => a[0] < b[1] && b[0] < a[1];

type Scenario = { label: string; key: string; database: { url?: string }; db?: VcudaDb };

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

async function startServer(scenario: Scenario, tls: Record<string, string>, logFile: string) {
  const config = loadControlPlaneConfig({
    flags: {
      logLevel: 'info',
      host: '127.0.0.1',
      port: 0,
      // 0 turns the HTTPS listener off.
      httpsPort: await freeLoopbackPort(),
      clusterName: CLUSTER,
      kube: { mode: 'none' },
      signingKeys: { source: 'ephemeral' },
      database: scenario.database,
      webhook: { certificates: { mode: 'files', ...tls } },
    },
  });
  // pino as production configures it, its lines into a file instead of the pod's stdout pipe.
  const logger = pino({ level: 'info', name: 'vcuda-control-plane' }, pino.destination({ dest: logFile, sync: true }));
  return startControlPlane(config, { logger, ...(scenario.db ? { db: scenario.db } : {}) });
}

async function measureScenario(
  scenario: Scenario,
  cp: RunningControlPlane,
  load: Omit<LoadSettings, 'port' | 'durationMs'>,
  log: (line: string) => void,
): Promise<Figure[]> {
  const port = Number(new URL(cp.httpsUrl ?? '').port);
  await runLoad({ ...load, port, durationMs: WARMUP_MS });
  const eluBefore = performance.eventLoopUtilization();
  const cpuBefore = process.cpuUsage();
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  const gc = watchGc();
  const measured = await runLoad({ ...load, port, durationMs: MEASURE_MS });
  const serverElu = performance.eventLoopUtilization(eluBefore).utilization;
  const cpu = process.cpuUsage(cpuBefore);
  loopDelay.disable();
  gc.stop();
  const latencies = measured.latenciesMs.sort((a, b) => a - b);
  const reviews = Math.max(1, latencies.length);
  const p99 = percentile(latencies, 99);
  const gcMs = gc.pauses.map(([a, b]) => b - a);
  const slowDuringGc = measured.slow.filter((r) => gc.pauses.some((p) => overlaps(r, p))).length;
  const scenarioText = `share-30 mutate, ${RATE_PER_S} req/s, HTTPS, ${scenario.label}`;
  log(
    `${scenario.label}: p50 ${percentile(latencies, 50).toFixed(2)} ms, p99 ${p99.toFixed(2)} ms; ` +
      `${measured.slow.length} over ${TARGET_P99_MS} ms, ${slowDuringGc} of them during a GC pause; ` +
      `loop delay p99 ${(loopDelay.percentile(99) / 1e6).toFixed(2)} ms max ${(loopDelay.max / 1e6).toFixed(1)} ms`,
  );
  const f = (name: string, value: number, unit: string, extra: Partial<Figure> = {}): Figure => ({
    name: `${name}${scenario.key}`,
    value,
    unit,
    scenario: scenarioText,
    ...extra,
  });
  return [
    f('p99_ms', p99, 'ms', atMost(p99, TARGET_P99_MS)),
    f('p50_ms', percentile(latencies, 50), 'ms'),
    f('p999_ms', percentile(latencies, 99.9), 'ms'),
    f('max_ms', latencies[latencies.length - 1] ?? Number.NaN, 'ms'),
    f('achieved_rps', Math.round(latencies.length / (measured.elapsedMs / 1000)), 'req/s'),
    f('server_event_loop_utilization', serverElu, 'ratio'),
    f('server_cpu_us_per_review', Math.round((cpu.user + cpu.system) / reviews), 'us'),
    f('generator_event_loop_utilization', measured.generatorElu, 'ratio'),
    // Why a request was slow: the server's thread was held (loop delay), by its collector or not.
    f('server_loop_delay_p99_ms', loopDelay.percentile(99) / 1e6, 'ms'),
    f('server_loop_delay_max_ms', loopDelay.max / 1e6, 'ms'),
    f('server_gc_pause_max_ms', Math.max(0, ...gcMs), 'ms'),
    f(
      'server_gc_total_ms',
      gcMs.reduce((sum, ms) => sum + ms, 0),
      'ms',
    ),
    f('slow_requests', measured.slow.length, 'requests', { scenario: `${scenarioText}, over ${TARGET_P99_MS} ms` }),
    f('slow_requests_during_gc', slowDuringGc, 'requests', {
      scenario: `${scenarioText}, over ${TARGET_P99_MS} ms and overlapping a server GC pause`,
    }),
    f('retries', measured.retries, 'requests'),
    f('errors', measured.errors, 'requests', { target: `0 of ${measured.offered}`, pass: measured.errors === 0 }),
  ];
}

/** The pre-check's own query, one at a time in this process: what each admission waits for. */
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

const bench: Benchmark = {
  name: 'webhook',
  description: `Mutating admission on the production path (the control plane's HTTPS listener, the ledger's quota pre-check, pino) of the real 1.26 share-30 pod at ${RATE_PER_S} req/s offered (open loop) from a separate load-generator process; ledger on local PostgreSQL, then embedded PGlite (figures suffixed _pglite)`,
  async run({ root, log }) {
    if (!(await isPostgresReachable())) throw new Error('the webhook benchmark needs PostgreSQL at 127.0.0.1:5432');
    const review = JSON.parse(
      readFileSync(join(root, 'webhooks/testdata/kubernetes-1.26/admission-mutate-create-share.json'), 'utf8'),
    );
    const bodies = Array.from({ length: 256 }, (_, i) => {
      review.request.uid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      return JSON.stringify(review);
    });
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-webhook-bench-'));
    const cert = await issueServingCertificate({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }, 2, new Date());
    const tls = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key'), caFile: join(dir, 'ca.crt') };
    writeFileSync(tls.certFile, cert.certPem);
    writeFileSync(tls.keyFile, cert.keyPem);
    writeFileSync(tls.caFile, cert.caPem);
    const load = { ca: cert.caPem, path: '/admission/mutate?timeout=5s', bodies, ratePerS: RATE_PER_S };
    const pg = await createTestDatabase('postgres');
    const lite = await connectDb({ dataDir: join(dir, 'pglite') });
    const figures: Figure[] = [];
    try {
      await migrate(lite);
      for (const db of [pg.db, lite]) await seedQuotas(db);
      figures.push(...(await measurePrecheck(pg.db, '', 'PostgreSQL')));
      figures.push(...(await measurePrecheck(lite, '_pglite', 'PGlite')));
      const scenarios: Scenario[] = [
        { label: 'ledger on PostgreSQL', key: '', database: { url: pg.url } },
        { label: 'ledger on embedded PGlite', key: '_pglite', database: {}, db: lite },
      ];
      for (const scenario of scenarios) {
        log(`${scenario.label}: warm-up ${WARMUP_MS} ms, then ${MEASURE_MS} ms at ${RATE_PER_S} req/s`);
        const cp = await startServer(scenario, tls, join(dir, `control-plane${scenario.key}.log`));
        try {
          figures.push(...(await measureScenario(scenario, cp, load, log)));
          if (scenario.key === '') {
            // What the production process sustains right now, as fast as answers come back.
            const port = Number(new URL(cp.httpsUrl ?? '').port);
            const closed = await runLoad({ ...load, port, ratePerS: undefined, concurrency: 32, durationMs: 3000 });
            figures.push({
              name: 'capacity_rps',
              value: Math.round(closed.latenciesMs.length / (closed.elapsedMs / 1000)),
              unit: 'req/s',
              scenario: `share-30 mutate, closed loop, 32 in flight, HTTPS, ${scenario.label}`,
            });
          }
        } finally {
          await cp.close();
        }
      }
      return figures;
    } finally {
      await closeDb(lite);
      await pg.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default bench;
