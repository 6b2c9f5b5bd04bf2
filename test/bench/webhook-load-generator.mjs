/**
 * The webhook benchmark's load generator, a separate Node process (its CPU and collector are not
 * the server's; only the machine's cores are shared), driven over IPC:
 *   { cmd: 'init', bodies }                          the AdmissionReviews to POST, in turn
 *   { cmd: 'target', id, port, ca, path }            a server to call
 *   { cmd: 'run', id, durationMs, ratePerS | concurrency, slowMs }  -> { result }
 * It calls each target as kube-apiserver calls a webhook: HTTPS with HTTP/1.1 keep-alive, one
 * request in flight per connection, no pipelining, a new connection only when none is idle (at
 * most 64, the rest queued), and the connections kept from one run to the next, so a run measures
 * answers on warm connections, not TLS handshakes (only what the server closed is reopened).
 * A lean client: node:https's ClientRequest/IncomingMessage would cost this thread about as much
 * CPU as the webhook itself, on the same 2 cores.
 *
 * Open loop: requests fall due at `ratePerS` whatever the answers do. Timers fire about once a
 * millisecond, so each request leaves up to a millisecond after it fell due: its latency counts
 * from when it left (`sentAt`), and `lateMs` says how late the generator itself was (a stall of
 * this process shows there, not as the server's latency). Requests that find every connection
 * busy wait in the queue, and that wait counts: the server caused it.
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { connect } from 'node:tls';

const MAX_SOCKETS = 64;
const CONTENT_LENGTH = /\r\ncontent-length: *(\d+)/i;
/** A sample interval in which this thread waited this long for a CPU counts as a stall. */
const WAIT_STALL_MS = 0.5;

const epoch = (t) => performance.timeOrigin + t;

function threadSchedstat() {
  const [cpuNs, waitNs] = readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ');
  return [Number(cpuNs) / 1e6, Number(waitNs) / 1e6];
}

let bodies = [];
const pools = new Map();

/** One target's connections, kept across runs. A job: { run, index, dueAt, sentAt, retried }. */
function createPool({ port, ca, path }) {
  const requests = bodies.map((text) => {
    const body = Buffer.from(text);
    const head = `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    return Buffer.concat([Buffer.from(head, 'latin1'), body]);
  });
  const sockets = [];
  const idle = [];
  const waiting = [];
  const pool = { opened: 0, sockets };

  const dispatch = (socket, job) => {
    socket.job = job;
    socket.write(requests[job.index % requests.length]);
  };
  const send = (job) => {
    const socket = idle.pop() ?? (sockets.length < MAX_SOCKETS ? open() : undefined);
    if (socket) dispatch(socket, job);
    else waiting.push(job);
  };
  const answered = (socket, ok) => {
    const job = socket.job;
    socket.job = undefined;
    const next = waiting.shift();
    if (next) dispatch(socket, next);
    else idle.push(socket);
    job.run.settle(job, ok);
  };
  function open() {
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
    pool.opened++;
    socket.setNoDelay(true);
    socket.partial = null;
    sockets.push(socket);
    socket.on('data', (chunk) => {
      const buf = socket.partial ? Buffer.concat([socket.partial, chunk]) : chunk;
      const end = buf.indexOf('\r\n\r\n');
      const head = end < 0 ? '' : buf.toString('latin1', 0, end);
      const length = Number(CONTENT_LENGTH.exec(head)?.[1] ?? 0);
      if (end < 0 || buf.length < end + 4 + length) {
        socket.partial = buf;
        return;
      }
      socket.partial = null;
      socket.answeredOnce = true;
      const text = buf.toString('utf8', end + 4, end + 4 + length);
      answered(socket, head.startsWith('HTTP/1.1 200') && text.includes('"allowed":true'));
    });
    socket.once('close', () => lost(socket));
    socket.on('error', () => {});
    return socket;
  }
  function lost(socket) {
    const i = idle.indexOf(socket);
    if (i >= 0) idle.splice(i, 1);
    sockets.splice(sockets.indexOf(socket), 1);
    const job = socket.job;
    if (job === undefined) return;
    socket.job = undefined;
    // The server closed a kept-alive connection (its idle timeout) as the request went out, and
    // nothing came back: resend once on another connection, as the API server's Go client does.
    if (!job.retried && socket.partial === null && socket.answeredOnce) {
      job.retried = true;
      job.run.retries++;
      return send(job);
    }
    job.run.settle(job, false);
  }
  pool.send = send;
  return pool;
}

/** Slow answers, and this thread's own stalls, for the benchmark to explain. */
function createRun(pool, { durationMs, ratePerS, concurrency, slowMs }, onDone) {
  const run = { latenciesMs: [], lateMs: [], slow: [], errors: 0, retries: 0, sent: 0, done: 0 };
  const total = concurrency ? Number.POSITIVE_INFINITY : Math.round((durationMs / 1000) * ratePerS);
  const start = performance.now();
  let finished = false;
  run.settle = (job, ok) => {
    const now = performance.now();
    const latency = now - job.sentAt;
    run.latenciesMs.push(latency);
    if (latency > slowMs) run.slow.push([epoch(job.sentAt), epoch(now), job.sentAt - job.dueAt]);
    if (!ok) run.errors++;
    run.done++;
    if (concurrency && now - start < durationMs) return submit(now);
    if (!finished && run.done >= Math.min(total, run.sent) && (concurrency || run.sent >= total)) {
      finished = true;
      onDone(performance.now() - start);
    }
  };
  const submit = (dueAt) => {
    const sentAt = performance.now();
    run.lateMs.push(sentAt - dueAt);
    pool.send({ run, index: run.sent++, dueAt, sentAt, retried: false });
  };
  const tick = () => {
    if (concurrency) {
      while (run.sent < concurrency) submit(performance.now());
      return;
    }
    const now = performance.now();
    const interval = 1000 / ratePerS;
    while (run.sent < total && start + run.sent * interval <= now) submit(start + run.sent * interval);
    if (run.sent < total) setTimeout(tick, 1);
  };
  run.begin = tick;
  return run;
}

function measure(pool, settings) {
  return new Promise((resolve) => {
    const openedBefore = pool.opened;
    const loopDelay = monitorEventLoopDelay({ resolution: 1 });
    loopDelay.enable();
    const cpuWaits = [];
    const first = threadSchedstat();
    let last = { at: epoch(performance.now()), stat: first };
    const sampler = setInterval(() => {
      const now = { at: epoch(performance.now()), stat: threadSchedstat() };
      if (now.stat[1] - last.stat[1] >= WAIT_STALL_MS) cpuWaits.push([last.at, now.at, now.stat[1] - last.stat[1]]);
      last = now;
    }, 2);
    const eluBefore = performance.eventLoopUtilization();
    const cpuBefore = process.cpuUsage();
    const run = createRun(pool, settings, (elapsedMs) => {
      clearInterval(sampler);
      loopDelay.disable();
      const cpu = process.cpuUsage(cpuBefore);
      const { settle: _s, begin: _b, ...figures } = run;
      resolve({
        ...figures,
        elapsedMs,
        connectionsOpened: pool.opened - openedBefore,
        connections: pool.sockets.length,
        cpuWaits,
        mainThreadWaitMs: threadSchedstat()[1] - first[1],
        processCpuMs: (cpu.user + cpu.system) / 1000,
        elu: performance.eventLoopUtilization(eluBefore).utilization,
        loopDelayMs: { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 },
      });
    });
    run.begin();
  });
}

process.on('message', async (m) => {
  if (m.cmd === 'init') bodies = m.bodies;
  else if (m.cmd === 'target') pools.set(m.id, createPool(m));
  else if (m.cmd === 'run') process.send({ id: m.id, result: await measure(pools.get(m.id), m) });
});
process.on('disconnect', () => process.exit(0));
