/**
 * The simulator's own speed: what-if planning throughput (pods placed per second through the
 * extender's fit and score code) and the simulated API server's create and watch latency, which
 * bound how fast end-to-end tests and `vcuda local` can go.
 */
import { resourceNames } from '../../contract/index.js';
import { startApiServer } from '../../sim/apiserver/api-server.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { KubeClient, podPath } from '../../sim/kube-client.js';
import { expandWorkload, parseWorkloadSpec } from '../../sim/traces/workload-spec.js';
import { runWhatIf } from '../../sim/whatif/whatif-run.js';
import { atLeast, atMost, type Benchmark, type Figure, percentile } from './harness.js';

async function whatIfFigures(log: (l: string) => void): Promise<Figure[]> {
  const names = resourceNames();
  const cluster = parseClusterSpec({ nodes: [{ count: 64, cards: 8 }] });
  const trace = expandWorkload(
    parseWorkloadSpec({
      pods: [
        { name: 'share', count: 3000, core: 20, memory: 8192 },
        { name: 'half', count: 600, core: 50, memory: 30000 },
        { name: 'whole', count: 100, core: 200 },
      ],
    }),
    names,
  );
  const start = performance.now();
  const report = runWhatIf(cluster, trace, { policy: 'binpack', quantity: { names, memoryUnitMiB: 1 } });
  const seconds = (performance.now() - start) / 1000;
  const rate = trace.length / seconds;
  log(`whatif: ${trace.length} pods on 512 cards in ${seconds.toFixed(2)} s, placed ${report.placed}`);
  return [
    {
      name: 'whatif_pods_per_second',
      value: Math.round(rate),
      unit: 'pods/s',
      scenario: '3700 pods, 64 nodes x 8 cards',
      ...atLeast(rate, 500),
    },
  ];
}

async function apiServerFigures(log: (l: string) => void): Promise<Figure[]> {
  const api = await startApiServer({ namespaces: ['bench'] });
  const client = new KubeClient(api.url);
  const creates: number[] = [];
  const delivery: number[] = [];
  const sentAt = new Map<string, number>();
  const ctl = new AbortController();
  const res = await fetch(`${api.url}/api/v1/namespaces/bench/pods?watch=1`, { signal: ctl.signal });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  const reading = (async () => {
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) return;
      buf += value;
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines) {
        const name = JSON.parse(l).object.metadata.name as string;
        const t = sentAt.get(name);
        if (t !== undefined) delivery.push(performance.now() - t);
      }
    }
  })();
  const pod = (name: string) => ({ metadata: { name }, spec: { containers: [{ name: 'c', image: 'x:1' }] } });
  for (let i = 0; i < 500; i++) {
    const name = `p-${i}`;
    const t = performance.now();
    sentAt.set(name, t);
    await client.create(podPath('bench'), pod(name));
    creates.push(performance.now() - t);
  }
  while (delivery.length < 500) await new Promise((r) => setTimeout(r, 10));
  ctl.abort();
  await reading;
  await api.close();
  creates.sort((a, b) => a - b);
  delivery.sort((a, b) => a - b);
  const p99c = percentile(creates, 99);
  const p99w = percentile(delivery, 99);
  log(
    `apiserver: create p50 ${percentile(creates, 50).toFixed(2)} ms p99 ${p99c.toFixed(2)} ms; watch p99 ${p99w.toFixed(2)} ms`,
  );
  return [
    {
      name: 'apiserver_create_p50_ms',
      value: Number(percentile(creates, 50).toFixed(2)),
      unit: 'ms',
      scenario: '500 pods, no webhooks',
    },
    {
      name: 'apiserver_create_p99_ms',
      value: Number(p99c.toFixed(2)),
      unit: 'ms',
      scenario: '500 pods, no webhooks',
      ...atMost(p99c, 20),
    },
    {
      name: 'apiserver_watch_delivery_p99_ms',
      value: Number(p99w.toFixed(2)),
      unit: 'ms',
      scenario: 'create -> watch event',
      ...atMost(p99w, 20),
    },
  ];
}

const benchmark: Benchmark = {
  name: 'sim',
  description: 'what-if planning throughput; simulated API server create and watch latency',
  run: async ({ log }) => [...(await whatIfFigures(log)), ...(await apiServerFigures(log))],
};

export default benchmark;
