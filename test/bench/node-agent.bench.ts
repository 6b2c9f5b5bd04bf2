/**
 * Node agent: the size of the memory plugin's ListAndWatch message (what decides the unit policy),
 * Allocate latency through real gRPC sockets with the fake kubelet, and the CPU the compute
 * samplers cost a full node every tick (they run ten times a second for as long as the agent does).
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigningKey, jwksOf, signAssignment, verifyAssignment } from '../../contract/index.js';
import { REGION_FILE_SIZE, REGION_MAGIC, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { createComputeSampler } from '../../node-agent/card-sampling/compute-sensor.js';
import {
  type CardHealthView,
  listMemoryDevices,
  planMemoryAdvertise,
} from '../../node-agent/device-plugin/device-list.js';
import { encodedListAndWatchBytes } from '../../node-agent/kubelet/grpc-services.js';
import { startHarness } from '../support/node-agent/agent-harness.js';
import { rpcTimingsMs } from '../support/node-agent/fake-kubelet.js';
import { atMost, type Benchmark, type Figure, percentile } from './harness.js';

const KUBELET_LIMIT = 4 * 1024 * 1024;
const BUDGET = KUBELET_LIMIT - 64 * 1024;

const cards = (n: number, memoryMiB: number): CardHealthView[] =>
  Array.from({ length: n }, (_, i) => ({ index: i, memoryMiB, numaNode: 0, healthy: true }));

async function messageSizes(log: (l: string) => void): Promise<Figure[]> {
  const out: Figure[] = [];
  const nodes = [
    { label: '8 x 141 GiB', c: cards(8, 141 * 1024) },
    { label: '2 x 80 GiB', c: cards(2, 81559) },
  ];
  for (const { label, c } of nodes) {
    for (const unit of [1, 4, 8, 256]) {
      const devices = listMemoryDevices(c, unit);
      const bytes = encodedListAndWatchBytes({ devices });
      const plan = planMemoryAdvertise(c, { memoryUnitMiB: unit, mode: 'auto', budgetBytes: BUDGET });
      log(`${label} @ ${unit} MiB: ${devices.length} devices, ${bytes} bytes -> ${plan.via}`);
      out.push({
        name: 'memory_list_and_watch_bytes',
        value: bytes,
        unit: 'bytes',
        scenario: `${label} at ${unit} MiB units (${devices.length} devices; policy: ${plan.via})`,
        // Whatever the policy sends must fit the kubelet's 4 MiB receive limit.
        ...(plan.via === 'device-plugin' ? atMost(bytes, KUBELET_LIMIT) : {}),
      });
    }
  }
  return out;
}

async function allocateLatency(log: (l: string) => void): Promise<Figure[]> {
  const h = await startHarness({ machine: { cards: 8, memoryMiB: 4096 } });
  try {
    await h.kubelet.waitFor(() => h.kubelet.devices(h.names.core).length === 800, 'plugins');
    const samplesMs: number[] = [];
    const uuids = h.agent.health.list().map((c) => c.uuid);
    for (let i = 0; i < 200; i++) {
      const pod = h.pod(`bench-${i}`).container('main', 1 + (i % 3), 64);
      await h.bind(pod, [[uuids[i % 8] as string]]);
      const start = performance.now();
      await h.kubelet.admitPod(pod.kubelet(false));
      samplesMs.push(performance.now() - start);
    }
    samplesMs.sort((a, b) => a - b);
    const p50 = percentile(samplesMs, 50);
    const p99 = percentile(samplesMs, 99);
    log(
      `admit (GetPreferredAllocation + Allocate + PreStartContainer): p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms`,
    );
    const scenario = '200 pods, one after another: GetPreferredAllocation + Allocate + PreStartContainer over gRPC';
    const allocate = [...(rpcTimingsMs['Allocate'] ?? [])].sort((a, b) => a - b);
    const preStart = [...(rpcTimingsMs['PreStartContainer'] ?? [])].sort((a, b) => a - b);
    const rpc = 'one RPC over a unix socket, as the kubelet sees it (Allocate: reset the allocation directory, answer)';
    return [
      { name: 'admit_p50_ms', value: p50, unit: 'ms', scenario },
      { name: 'admit_p99_ms', value: p99, unit: 'ms', scenario },
      { name: 'allocate_p50_ms', value: percentile(allocate, 50), unit: 'ms', scenario: rpc },
      {
        name: 'allocate_p99_ms',
        value: percentile(allocate, 99),
        unit: 'ms',
        scenario: rpc,
        ...atMost(percentile(allocate, 99), 50),
      },
      {
        name: 'prestart_p99_ms',
        value: percentile(preStart, 99),
        unit: 'ms',
        scenario:
          'PreStartContainer: PodResources List, verify JWS, write files and CDI spec, annotate (kubelet deadline 30 s)',
        ...atMost(percentile(preStart, 99), 1000),
      },
    ];
  } finally {
    await h.close();
  }
}

const SAMPLER_CARDS = 8;
const SAMPLER_CONTAINERS_PER_CARD = 10;
const SAMPLER_TICKS = 2000;

/** A fresh region per container on tmpfs (as /run/vcuda), its busy counter opened for the tenant's writes. */
function samplerRegions(dir: string): { paths: string[][]; counters: number[] } {
  const paths = Array.from({ length: SAMPLER_CARDS }, (_, card) =>
    Array.from({ length: SAMPLER_CONTAINERS_PER_CARD }, (_, k) => {
      const path = join(dir, `card${card}-c${k}`);
      const buf = Buffer.alloc(REGION_FILE_SIZE);
      buf.write(REGION_MAGIC, 0, 'latin1');
      writeFileSync(path, buf);
      return path;
    }),
  );
  return { paths, counters: paths.flat().map((p) => openSync(p, 'r+')) };
}

/**
 * The in-process sensor's samplers of a full node (8 cards, 10 tenants each, every counter moving
 * every tick, NVML answering the guard's device utilization), as the agent runs them: CPU of the
 * median tick of all 8, the tenants' counter writes left out.
 */
async function samplerCost(log: (l: string) => void): Promise<Figure[]> {
  const dir = mkdtempSync(join('/dev/shm', 'vcuda-bench-sampler-'));
  const { paths, counters } = samplerRegions(dir);
  let now = Date.now();
  const samplers = paths.map(
    (onCard, cardIndex) =>
      createComputeSampler({
        cardIndex,
        periodMs: 100,
        nowMs: () => now,
        source: {
          processUtilizationSupported: () => true,
          utilizationRates: () => ({ gpuPercent: 40 }),
          processUtilization: () => [],
        },
        placement: {
          containersOn: () => onCard.map((regionPath, i) => ({ key: `c${i}`, regionPath, deviceIndex: 0 })),
          containerOfPid: () => null,
        },
      }).sampler,
  );
  const at = regionDeviceOffset(0) + regionOffsets.device.busyNs;
  const counter = Buffer.alloc(8);
  let busyNs = 0n;
  const perTickMs: number[] = [];
  try {
    for (let i = 0; i < 2 * SAMPLER_TICKS; i++) {
      now += 100;
      busyNs += 4_000_000n; // each tenant 4 % of the card
      counter.writeBigUInt64LE(busyNs);
      for (const fd of counters) writeSync(fd, counter, 0, 8, at);
      const cpu = process.cpuUsage();
      for (const s of samplers) s.sampleOnce();
      const used = process.cpuUsage(cpu);
      if (i >= SAMPLER_TICKS) perTickMs.push((used.user + used.system) / 1000); // the first half warms up
    }
  } finally {
    for (const s of samplers) s.stop();
    for (const fd of counters) closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  // The median tick: a garbage collection that lands in one says little about the samplers.
  const mean = percentile(
    perTickMs.sort((a, b) => a - b),
    50,
  );
  const scenario = `${SAMPLER_CARDS} cards x ${SAMPLER_CONTAINERS_PER_CARD} containers, in-process sensor with the counter check, every counter moving`;
  log(`compute samplers: ${mean.toFixed(3)} ms CPU per tick (median) (${scenario})`);
  return [
    { name: 'sampler_cpu_ms_per_tick', value: Number(mean.toFixed(4)), unit: 'ms', scenario },
    {
      name: 'sampler_core_share',
      value: Number((mean / 100).toFixed(5)),
      unit: 'ratio',
      scenario: `${scenario}: of one core, at the default 100 ms period`,
    },
  ];
}

const VERIFICATIONS = 2000;

/**
 * One signed assignment verified as the agent verifies each pod's at Allocate and PreStart (and the
 * control plane once): the median of VERIFICATIONS after as many unmeasured.
 */
async function verifyCost(log: (l: string) => void): Promise<Figure[]> {
  const key = await generateSigningKey('bench-1');
  const nowSeconds = Math.floor(Date.now() / 1000);
  const token = await signAssignment(
    {
      v: 1,
      pod: { uid: 'bench-uid', namespace: 'bench', name: 'share-30' },
      node: 'node-1',
      cluster: 'bench',
      containers: [
        {
          name: 'main',
          isInit: false,
          cards: [{ uuid: 'GPU-11111111-2222-3333-4444-555555555555', core: 30, memoryBytes: 8 * 2 ** 30 }],
          coreLimit: 30,
          mode: 'hard',
        },
      ],
    },
    key,
    { nowSeconds, ttlSeconds: 600 },
  );
  const jwks = jwksOf([key]);
  const expect = { podUid: 'bench-uid', node: 'node-1', nowSeconds };
  const us: number[] = [];
  for (let i = 0; i < 2 * VERIFICATIONS; i++) {
    const start = performance.now();
    await verifyAssignment(token, jwks, expect);
    if (i >= VERIFICATIONS) us.push((performance.now() - start) * 1000);
  }
  const median = percentile(
    us.sort((a, b) => a - b),
    50,
  );
  log(`verifyAssignment: median ${median.toFixed(0)} us`);
  return [
    {
      name: 'verify_assignment_p50_us',
      value: Math.round(median),
      unit: 'us',
      scenario: `one EdDSA-signed share assignment, ${VERIFICATIONS} verifications after as many unmeasured`,
    },
  ];
}

const bench: Benchmark = {
  name: 'node-agent',
  description:
    "Memory plugin ListAndWatch size per unit (the unit policy), pod admission latency through the device plugins, the compute samplers' CPU per tick on a full node, and one assignment's verification",
  run: async ({ log }) => [
    ...(await messageSizes(log)),
    ...(await allocateLatency(log)),
    ...(await samplerCost(log)),
    ...(await verifyCost(log)),
  ],
};

export default bench;
