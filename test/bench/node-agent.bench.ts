/**
 * Node agent: the size of the memory plugin's ListAndWatch message (what decides the unit policy)
 * and Allocate latency through real gRPC sockets with the fake kubelet.
 */
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

const bench: Benchmark = {
  name: 'node-agent',
  description:
    'Memory plugin ListAndWatch size per unit (the unit policy), and pod admission latency through the device plugins',
  run: async ({ log }) => [...(await messageSizes(log)), ...(await allocateLatency(log))],
};

export default bench;
