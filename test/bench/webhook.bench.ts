/**
 * Admission latency under a steady offered load: the real 1.26 `share-30` AdmissionReview
 * (about 6 KiB, with managedFields) POSTed over HTTPS keep-alive to the mutating hook at a fixed
 * rate, open loop (each latency counts from the request's scheduled send time, so a stall shows
 * as the queue it causes). The webhook is one Node process (its main thread); the load generator
 * is a worker thread of that process, so the figure includes loopback TLS both ways.
 */
import { readFileSync } from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { serve } from '@hono/node-server';
import { resourceNames } from '../../contract/index.js';
import { createAdmissionListener } from '../../webhooks/admission-handler.js';
import { type AdmissionRoutesDeps, admissionRoutes } from '../../webhooks/admission-routes.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { atMost, type Benchmark, type Figure, percentile } from './harness.js';

const RATE_PER_S = 2000;
const WARMUP_MS = 2000;
const MEASURE_MS = 10_000;
const TARGET_P99_MS = 3;

type LoadResult = {
  latenciesMs: number[];
  errors: number;
  /** Requests resent after the server closed an idle kept-alive connection under them. */
  retries: number;
  offered: number;
  elapsedMs: number;
  /** Busy share of the load generator's own thread. */
  generatorElu: number;
};

/**
 * The load generator, in plain JavaScript so a worker thread can run it without a TypeScript
 * loader. It has its own event loop, as the API server would, so its work does not queue behind
 * the webhook's (or the webhook's behind it); both still share the machine's cores.
 */
const LOAD_GENERATOR = `
const tls = require('node:tls');
const { parentPort, workerData } = require('node:worker_threads');
const { port, ca, path, bodies, durationMs, ratePerS, concurrency } = workerData;
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
const settle = (socket, ok) => {
  latenciesMs.push(performance.now() - socket.job.scheduledAt);
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
  parentPort.postMessage({ latenciesMs, errors, retries, offered: sent, elapsedMs: performance.now() - start,
    generatorElu: performance.eventLoopUtilization(eluStart).utilization });
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
`;

function runLoad(workerData: {
  port: number;
  ca: string;
  path: string;
  bodies: string[];
  durationMs: number;
  ratePerS?: number;
  concurrency?: number;
}): Promise<LoadResult> {
  const worker = new Worker(LOAD_GENERATOR, { eval: true, workerData });
  return new Promise<LoadResult>((resolve, reject) => {
    worker.once('message', (m: LoadResult) => resolve(m));
    worker.once('error', reject);
  }).finally(() => worker.terminate());
}

const bench: Benchmark = {
  name: 'webhook',
  description: `Mutating admission of the real 1.26 share-30 pod over HTTPS keep-alive at ${RATE_PER_S} req/s offered (open loop), webhook (plain node:https listener) on one Node main thread, load from a worker thread`,
  async run({ root, log }) {
    const review = JSON.parse(
      readFileSync(join(root, 'webhooks/testdata/kubernetes-1.26/admission-mutate-create-share.json'), 'utf8'),
    );
    const bodies = Array.from({ length: 256 }, (_, i) => {
      review.request.uid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      return JSON.stringify(review);
    });
    const deps: AdmissionRoutesDeps = {
      names: resourceNames(),
      memoryUnitMiB: 1,
      clusterName: 'bench',
      schedulerName: 'vcuda-scheduler',
      privilegedUsernames: ['system:serviceaccount:vcuda-system:vcuda-control-plane'],
      maxBodyBytes: 3 * 1024 * 1024,
      logger: { info: () => {}, warn: () => {} },
      // The ledger's answer arrives asynchronously, as it would from a pool.
      precheckQuota: async () => ({ ok: true }),
    };
    const cert = await issueServingCertificate({ dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] }, 2, new Date());
    const tls = { cert: cert.certPem, key: cert.keyPem };
    // The hot path: the plain node:https listener (webhooks/admission-handler.ts) at /admission/.
    const listener = createAdmissionListener(deps);
    const server = https.createServer(tls, (req, res) => {
      if (!listener(req, res)) {
        res.writeHead(404);
        res.end();
      }
    });
    server.listen(0, '127.0.0.1');
    // For comparison, the hono routes as control-plane/app.ts mounts them today (closed loop only).
    const app = admissionRoutes(deps);
    const honoServer = serve({
      fetch: app.fetch,
      port: 0,
      hostname: '127.0.0.1',
      createServer: https.createServer,
      serverOptions: tls,
    });
    await Promise.all([server, honoServer].map((s) => new Promise((r) => s.once('listening', r))));
    const { port } = server.address() as AddressInfo;
    const honoPort = (honoServer.address() as AddressInfo).port;
    try {
      log(`warm-up ${WARMUP_MS} ms, then ${MEASURE_MS} ms at ${RATE_PER_S} req/s`);
      const load = { port, ca: cert.caPem, path: '/admission/mutate?timeout=5s', bodies, ratePerS: RATE_PER_S };
      await runLoad({ ...load, durationMs: WARMUP_MS });
      // Other work on the machine takes cores from both threads; record how busy it was.
      const loadBefore = loadavg()[0] ?? 0;
      const eluBefore = performance.eventLoopUtilization();
      const cpuBefore = process.cpuUsage();
      const loopDelay = monitorEventLoopDelay({ resolution: 1 });
      loopDelay.enable();
      // Collector pauses on the webhook's thread (the worker's heap is collected on its own).
      const gcPausesMs: number[] = [];
      const gcObserver = new PerformanceObserver((list) => {
        for (const entry of list.getEntries()) gcPausesMs.push(entry.duration);
      });
      gcObserver.observe({ entryTypes: ['gc'] });
      const measured = await runLoad({ ...load, durationMs: MEASURE_MS });
      const { latenciesMs, errors, retries, offered, elapsedMs, generatorElu } = measured;
      const serverElu = performance.eventLoopUtilization(eluBefore).utilization;
      const cpu = process.cpuUsage(cpuBefore);
      loopDelay.disable();
      gcObserver.disconnect();
      const latencies = latenciesMs.sort((a, b) => a - b);
      const p99 = percentile(latencies, 99);
      const reviews = Math.max(1, latencies.length);
      const scenario = `share-30 mutate, ${RATE_PER_S} req/s, HTTPS`;
      const figures: Figure[] = [
        { name: 'p99_ms', value: p99, unit: 'ms', scenario, ...atMost(p99, TARGET_P99_MS) },
        { name: 'p50_ms', value: percentile(latencies, 50), unit: 'ms', scenario },
        { name: 'p999_ms', value: percentile(latencies, 99.9), unit: 'ms', scenario },
        { name: 'max_ms', value: latencies[latencies.length - 1] ?? Number.NaN, unit: 'ms', scenario },
        { name: 'achieved_rps', value: Math.round(latencies.length / (elapsedMs / 1000)), unit: 'req/s', scenario },
        // Busy share of the webhook's thread, and what that costs per review: capacity is about 1e6 / this.
        { name: 'server_event_loop_utilization', value: serverElu, unit: 'ratio', scenario },
        {
          name: 'server_busy_us_per_review',
          value: Math.round((serverElu * MEASURE_MS * 1000) / reviews),
          unit: 'us',
          scenario,
        },
        // The load generator shares the 2 cores: its thread's busy share, and the CPU of both threads.
        { name: 'generator_event_loop_utilization', value: generatorElu, unit: 'ratio', scenario },
        {
          name: 'process_cpu_us_per_review',
          value: Math.round((cpu.user + cpu.system) / reviews),
          unit: 'us',
          scenario,
        },
        // How long the webhook's own thread was kept from running (its GC, or the machine's other work).
        { name: 'server_loop_delay_max_ms', value: loopDelay.max / 1e6, unit: 'ms', scenario },
        { name: 'server_gc_pause_max_ms', value: Math.max(0, ...gcPausesMs), unit: 'ms', scenario },
        {
          name: 'server_gc_total_ms',
          value: gcPausesMs.reduce((sum, ms) => sum + ms, 0),
          unit: 'ms',
          scenario,
        },
        {
          name: 'machine_load_1m',
          value: Math.round(Math.max(loadBefore, loadavg()[0] ?? 0) * 100) / 100,
          unit: 'runnable',
          scenario,
        },
        { name: 'retries', value: retries, unit: 'requests', scenario },
        { name: 'errors', value: errors, unit: 'requests', scenario, target: `0 of ${offered}`, pass: errors === 0 },
      ];
      // What this machine sustains right now, as fast as answers come back (32 in flight, 3 s).
      for (const [name, target, path] of [
        ['node:https listener', port, load.path],
        ['hono routes', honoPort, '/mutate?timeout=5s'],
      ] as const) {
        const closed = await runLoad({
          ...load,
          port: target,
          path,
          ratePerS: undefined,
          concurrency: 32,
          durationMs: 3000,
        });
        figures.push({
          name: target === port ? 'capacity_rps' : 'capacity_rps_hono',
          value: Math.round(closed.latenciesMs.length / (closed.elapsedMs / 1000)),
          unit: 'req/s',
          scenario: `share-30 mutate, closed loop, 32 in flight, HTTPS, ${name}`,
        });
      }
      return figures;
    } finally {
      server.close();
      honoServer.close();
    }
  },
};

export default bench;
