/**
 * Preloaded (`node --import`) into the webhook benchmark's server processes: the real
 * `vcuda control-plane` and the trivial ceiling server. It changes nothing they do; between a
 * `start` and a `stop` message from the benchmark (over the IPC channel) it records, inside that
 * process, what can hold a request:
 * - the collector's pauses (perf_hooks `gc` entries), with their kind;
 * - the event loop's delay (monitorEventLoopDelay, 1 ms resolution);
 * - the main thread's wait for a CPU (the kernel's run-queue time in /proc/thread-self/schedstat,
 *   sampled every 2 ms): time the thread was ready to run and another process held both cores;
 * - every request's server-side time, from the `request` event to the response's last byte
 *   handed to the socket (node's `http.server.*` diagnostics channels).
 * Times are epoch milliseconds so the benchmark can set them beside the load generator's.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';

const SAMPLE_MS = 2;
/** A sample interval in which the thread waited this long for a CPU counts as a stall. */
const WAIT_STALL_MS = 0.5;
const GC_KINDS = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };

const epochNow = () => performance.timeOrigin + performance.now();

/** [on-CPU ms, run-queue wait ms] of the calling (main) thread so far. */
function threadSchedstat() {
  const [cpuNs, waitNs] = readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ');
  return [Number(cpuNs) / 1e6, Number(waitNs) / 1e6];
}

function startRecording() {
  const gcPauses = [];
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const start = performance.timeOrigin + e.startTime;
      gcPauses.push([start, start + e.duration, GC_KINDS[e.detail?.kind] ?? 'other']);
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  const cpuWaits = [];
  const first = threadSchedstat();
  let last = { at: epochNow(), stat: first };
  const sampler = setInterval(() => {
    const now = { at: epochNow(), stat: threadSchedstat() };
    const waited = now.stat[1] - last.stat[1];
    if (waited >= WAIT_STALL_MS) cpuWaits.push([last.at, now.at, waited]);
    last = now;
  }, SAMPLE_MS);
  const started = new WeakMap();
  const serverMs = [];
  const onStart = ({ response }) => started.set(response, performance.now());
  const onFinish = ({ response }) => {
    const at = started.get(response);
    if (at !== undefined) serverMs.push(performance.now() - at);
  };
  subscribe('http.server.request.start', onStart);
  subscribe('http.server.response.finish', onFinish);
  const cpuBefore = process.cpuUsage();
  const eluBefore = performance.eventLoopUtilization();
  const startedAt = epochNow();
  return () => {
    // Each recording subscribes anew: the last one's handlers (and the times they hold) go with it.
    unsubscribe('http.server.request.start', onStart);
    unsubscribe('http.server.response.finish', onFinish);
    clearInterval(sampler);
    loopDelay.disable();
    gc.disconnect();
    const end = threadSchedstat();
    const cpu = process.cpuUsage(cpuBefore);
    return {
      elapsedMs: epochNow() - startedAt,
      gcPauses,
      loopDelayMs: {
        p50: loopDelay.percentile(50) / 1e6,
        p99: loopDelay.percentile(99) / 1e6,
        max: loopDelay.max / 1e6,
      },
      cpuWaits,
      mainThreadCpuMs: end[0] - first[0],
      mainThreadWaitMs: end[1] - first[1],
      processCpuMs: (cpu.user + cpu.system) / 1000,
      elu: performance.eventLoopUtilization(eluBefore).utilization,
      serverMs,
      heapUsedMiB: getHeapStatistics().used_heap_size / 2 ** 20,
    };
  };
}

let stop;
process.on('message', (m) => {
  if (m?.probe === 'start') stop = startRecording();
  else if (m?.probe === 'stop' && stop) {
    process.send({ probe: 'report', report: stop() });
    stop = undefined;
  }
});
