/**
 * What the node agent's DRA plugin costs a pod's start: NodePrepareResources and
 * NodeUnprepareResources latency, timed at a @grpc/grpc-js client of the plugin's real unix socket
 * (v1), the agent in DRA mode over fake NVML with an in-memory API server (harness:
 * test/support/node-agent/dra-harness.ts). Each Prepare is a distinct share claim, so every one
 * reads its claim, checks it against the node's slice, writes the limit file, region and CDI spec
 * and checkpoints before answering. Beside it, in the same run and interleaved call by call, the
 * transport's floor: the same plugin server (same sockets, services and answer shape) whose
 * handler does nothing. `VCUDA_BENCH_DRA_PREPARES` (default 500) sets the claims.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ClaimHandler, startDraPluginServer } from '../../node-agent/dra/plugin-server.js';
import type { DraClaimRef } from '../../node-agent/kubelet/dra-protocol.js';
import { claim, GiB } from '../support/node-agent/dra-claim.js';
import { type DraHarness, DraKubeletClient, startDraHarness } from '../support/node-agent/dra-harness.js';
import { atMost, type Benchmark, type Figure, percentile } from './harness.js';

const PREPARES = Number(process.env.VCUDA_BENCH_DRA_PREPARES ?? 500);
/** Claims live on the node at once: 10 shares of 10 cores and 4 GiB on each of the 2 fake cards. */
const LIVE = 20;
const WARM_UP = 40;
const TARGET_P99_MS = 20;

type Timings = { prepare: number[]; unprepare: number[] };

/** A handler that prepares nothing and answers as the plugin does for a one-device share. */
const doNothing: ClaimHandler = {
  prepare: async (c: DraClaimRef) => ({
    error: '',
    devices: [
      {
        request_names: ['gpu0'],
        pool_name: 'node-1',
        device_name: 'gpu-0',
        cdi_device_ids: [`gpu.vcuda.io/claim=${c.uid}-gpu-0`],
      },
    ],
  }),
  unprepare: async () => ({ error: '' }),
};

async function timed<T>(out: number[], call: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const res = await call();
  out.push(performance.now() - t0);
  return res;
}

/**
 * Prepares `count` distinct claims, `LIVE` at a time, then unprepares them, on the plugin and on
 * the do-nothing server call by call; refuses to time a Prepare or Unprepare that failed.
 */
async function run(h: DraHarness, floor: DraKubeletClient, prefix: string, count: number) {
  const plugin: Timings = { prepare: [], unprepare: [] };
  const ceiling: Timings = { prepare: [], unprepare: [] };
  for (let round = 0; round * LIVE < count; round++) {
    const refs: DraClaimRef[] = [];
    for (let i = round * LIVE; i < Math.min(count, (round + 1) * LIVE); i++) {
      const c = claim(`${prefix}-${i}`)
        .share(`gpu-${i % 2}`, 10, 4 * GiB)
        .reservedFor(`pod-${prefix}-${i}`);
      h.api.putClaim(c.obj());
      const res = await timed(plugin.prepare, () => h.kubelet.prepare('v1', [c.ref()]));
      const error = res.claims[c.uid]?.error;
      if (error !== '') throw new Error(`Prepare of ${c.name} failed: ${error ?? 'no answer'}`);
      await timed(ceiling.prepare, () => floor.prepare('v1', [c.ref()]));
      refs.push(c.ref());
    }
    for (const ref of refs) {
      const res = await timed(plugin.unprepare, () => h.kubelet.unprepare('v1', [ref]));
      if (res.claims[ref.uid]?.error !== '') throw new Error(`Unprepare of ${ref.name} failed`);
      await timed(ceiling.unprepare, () => floor.unprepare('v1', [ref]));
    }
  }
  if (h.agent.preparer.prepared().length !== 0) throw new Error('claims left prepared after their Unprepare');
  return { plugin, ceiling };
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

function figuresOf(plugin: Timings, ceiling: Timings, log: (line: string) => void): Figure[] {
  const figures: Figure[] = [];
  for (const step of ['prepare', 'unprepare'] as const) {
    const a = sorted(plugin[step]);
    const b = sorted(ceiling[step]);
    const [p50, p99, floor50, floor99] = [percentile(a, 50), percentile(a, 99), percentile(b, 50), percentile(b, 99)];
    log(
      `${step}: plugin p50 ${p50.toFixed(2)} p99 ${p99.toFixed(2)} ms; do-nothing server p50 ${floor50.toFixed(2)} p99 ${floor99.toFixed(2)} ms`,
    );
    const scenario = `${a.length} share claims, ${LIVE} live on 2 fake cards`;
    const floorScenario = `${b.length} calls to a do-nothing server, same sockets and services (same run)`;
    figures.push(
      { name: `${step}_p50_ms`, value: p50, unit: 'ms', scenario },
      {
        name: `${step}_p99_ms`,
        value: p99,
        unit: 'ms',
        scenario,
        ...(step === 'prepare' ? atMost(p99, TARGET_P99_MS) : {}),
      },
      { name: `${step}_p50_floor_ms`, value: floor50, unit: 'ms', scenario: floorScenario },
      { name: `${step}_p99_floor_ms`, value: floor99, unit: 'ms', scenario: floorScenario },
      { name: `${step}_p50_over_floor_ms`, value: p50 - floor50, unit: 'ms', scenario },
    );
  }
  return figures;
}

const bench: Benchmark = {
  name: 'dra-prepare',
  description:
    "DRA kubelet plugin: NodePrepareResources / NodeUnprepareResources latency at the kubelet's gRPC client over the plugin's unix socket (fake NVML, in-memory API server), beside a do-nothing server on the same transport, same run",
  async run({ log }) {
    const h = await startDraHarness();
    const dir = mkdtempSync(join(tmpdir(), 'dra-floor-'));
    const server = await startDraPluginServer(
      { driver: 'gpu.vcuda.io', registryDir: join(dir, 'reg'), pluginDir: join(dir, 'plugins'), handler: doNothing },
      { info: () => undefined, warn: () => undefined },
    );
    const floor = new DraKubeletClient({ server });
    try {
      await h.kubelet.register();
      await floor.register();
      await run(h, floor, 'warm', WARM_UP);
      const { plugin, ceiling } = await run(h, floor, 'claim', PREPARES);
      return figuresOf(plugin, ceiling, log);
    } finally {
      floor.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
      await h.close();
    }
  },
};

export default bench;
