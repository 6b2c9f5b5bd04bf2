/**
 * Dashboard cost at cluster scale: building the overview (the view model every open page and
 * every SSE tick shares), serving /ui/overview end to end, its payload size, and reading the
 * capacity from a real ledger (PGlite) with the dashboard's adapter.
 */
import { loadavg } from 'node:os';
import { createApp } from '../../control-plane/app.js';
import { createLedgerDashboardSource } from '../../control-plane/dashboard/ledger-source.js';
import { buildOverview } from '../../control-plane/dashboard/overview.js';
import { dashboardRoutes } from '../../control-plane/dashboard/routes.js';
import type { ClusterState, DashboardSource } from '../../control-plane/dashboard/source.js';
import type { VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { createReportRunner } from '../../db/reports.js';
import { createTestDatabase, testDbKinds } from '../support/db/test-databases.js';
import { atMost, type Benchmark, type Figure, percentile } from './harness.js';

/** `nodes` nodes of 8 cards, each card holding 0..3 pods of varied shares (deterministic). */
function syntheticClusters(nodes: number): ClusterState[] {
  let seed = 42;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const since = new Date(0).toISOString();
  return [
    {
      name: 'bench',
      nodes: Array.from({ length: nodes }, (_, n) => ({
        name: `node-${n}`,
        cards: Array.from({ length: 8 }, (_, i) => {
          const pods = Math.floor(rand() * 4);
          return {
            uuid: `GPU-${n}-${i}`,
            index: i,
            model: 'A100',
            memoryMiB: 81920,
            allocations: Array.from({ length: pods }, (_, p) => ({
              cluster: 'bench',
              namespace: `ns-${(n + p) % 40}`,
              pod: `pod-${n}-${i}-${p}`,
              podUid: `uid-${n}-${i}-${p}`,
              container: 'main',
              core: 10 + Math.floor(rand() * 20),
              memoryMiB: 4096 + Math.floor(rand() * 8192),
              state: 'bound' as const,
              since,
            })),
          };
        }),
      })),
    },
  ];
}

async function timeIt(runs: number, fn: () => Promise<unknown> | unknown): Promise<number[]> {
  // Warm up: JIT, caches, the first PGlite query plan.
  for (let i = 0; i < 3; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out.sort((a, b) => a - b);
}

const round = (n: number) => Math.round(n * 100) / 100;

/** The adapter's capacity read (cards + live allocations) on a ledger of 200 nodes x 8 cards, 1600 pods. */
async function benchLedgerRead(db: VcudaDb, kind: string, log: (l: string) => void): Promise<Figure[]> {
  const ledger = createLedger(db, { clock: () => new Date() });
  const nodes = 200;
  for (let n = 0; n < nodes; n++) {
    await ledger.upsertNode(
      'bench',
      `node-${n}`,
      Array.from({ length: 8 }, (_, i) => ({ uuid: `GPU-${n}-${i}`, index: i, model: 'A100', memoryMiB: 81920 })),
    );
  }
  for (let p = 0; p < 1600; p++) {
    const n = p % nodes;
    await ledger.reserve({
      cluster: 'bench',
      podUid: `uid-${p}`,
      namespace: `ns-${p % 20}`,
      pod: `pod-${p}`,
      node: `node-${n}`,
      items: [{ container: 'main', cardUuid: `GPU-${n}-${Math.floor(p / nodes) % 8}`, core: 25, memoryMiB: 8192 }],
    });
  }
  const source = createLedgerDashboardSource({
    db,
    reports: createReportRunner(db, { clock: () => new Date() }),
    clock: () => new Date(),
    readRefusals: async () => [],
  });
  const read = await timeIt(30, () => source.readClusters());
  const p99 = round(percentile(read, 99));
  const scenario = `${kind}, 200 nodes x 8 cards, 1600 pods`;
  log(`${scenario}: readClusters p99 ${p99} ms`);
  // Embedded PGlite is for local runs; the target is for PostgreSQL, what clusters use.
  const p50 = round(percentile(read, 50));
  return [
    {
      name: 'ledger_read_clusters_p50_ms',
      value: p50,
      unit: 'ms',
      scenario,
      ...(kind === 'postgres' ? atMost(p50, 50) : {}),
    },
    { name: 'ledger_read_clusters_p99_ms', value: p99, unit: 'ms', scenario },
  ];
}

const bench: Benchmark = {
  name: 'dashboard',
  description:
    'Dashboard overview build and /ui/overview at 125 and 1000 nodes of 8 cards (synthetic, ~1.5 pods per card), and the ledger adapter reading 200 nodes of cards from PGlite and PostgreSQL.',
  async run({ log }) {
    // How busy the machine was: figures from a loaded shared machine read accordingly.
    const figures: Figure[] = [
      { name: 'machine_load_avg_1m', value: round(loadavg()[0] ?? 0), unit: 'runnable', scenario: 'at start' },
    ];
    const now = new Date();
    const window = { from: new Date(now.getTime() - 86_400_000), to: now };
    for (const nodes of [125, 1000]) {
      const clusters = syntheticClusters(nodes);
      const scenario = `${nodes} nodes x 8 cards`;
      const build = await timeIt(30, () =>
        buildOverview({ clusters, quotas: [], reports: { gpuHours: [], idle: [] }, refusals: [], window, now }),
      );
      const p99 = round(percentile(build, 99));
      const p50 = round(percentile(build, 50));
      // Targets on the median: the p99 of a shared 2-core machine mostly measures its neighbours.
      figures.push({
        name: 'overview_build_p50_ms',
        value: p50,
        unit: 'ms',
        scenario,
        ...atMost(p50, nodes <= 125 ? 10 : 60),
      });
      figures.push({ name: 'overview_build_p99_ms', value: p99, unit: 'ms', scenario });

      const source: DashboardSource = {
        readClusters: async () => clusters,
        readClusterNames: async () => clusters.map((c) => c.name),
        readQuotas: async () => [],
        readReports: async () => ({ gpuHours: [], idle: [] }),
        readRefusals: async () => [],
      };
      // cacheMs 0: every request rebuilds, the worst case of many pages with different windows.
      const app = createApp({ dashboard: dashboardRoutes({ source, clock: () => new Date(), cacheMs: 0 }) });
      let bytes = 0;
      const serve = await timeIt(20, async () => {
        const res = await app.request('/ui/overview');
        bytes = (await res.text()).length;
      });
      const serveP99 = round(percentile(serve, 99));
      const serveP50 = round(percentile(serve, 50));
      figures.push({
        name: 'ui_overview_p50_ms',
        value: serveP50,
        unit: 'ms',
        scenario,
        ...atMost(serveP50, nodes <= 125 ? 20 : 150),
      });
      figures.push({ name: 'ui_overview_p99_ms', value: serveP99, unit: 'ms', scenario });
      figures.push({ name: 'ui_overview_payload_kib', value: Math.round(bytes / 1024), unit: 'KiB', scenario });
      log(`${scenario}: build p99 ${p99} ms, serve p99 ${serveP99} ms, ${Math.round(bytes / 1024)} KiB`);
    }

    for (const kind of await testDbKinds()) {
      const t = await createTestDatabase(kind);
      try {
        figures.push(...(await benchLedgerRead(t.db, kind, log)));
      } finally {
        await t.drop();
      }
    }
    return figures;
  },
};

export default bench;
