/**
 * Usage of DRA claims end to end, the DRA counterpart of usage.e2e.test.ts: two claims allocated on
 * one card are charged in the ledger as the charge hook charges them, prepared by the node agent in
 * DRA mode through its kubelet plugin socket; the agent's card sampler reads per-process
 * utilization from the fake NVML, maps the busy pod's host pid to its claim through the cgroup
 * view and writes the measured share into the claim's region; the agent's own usage reporter sends
 * it with its node-bound token (reviewed with the API server) to the control plane's usage route
 * over HTTP, and the control plane's reports over HTTP show the busy claim's GPU-hours used beside
 * allocated for its namespace and team, and the other claim as idle.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DRA_DRIVER, draClaimSchema } from '../../contract/index.js';
import { cachedAuthenticator, requireCaller, tokenReview } from '../../control-plane/api/caller-auth.js';
import { reportsRoutes } from '../../control-plane/api/reports-routes.js';
import { usageRoutes } from '../../control-plane/api/usage-routes.js';
import { NODE_NAME_EXTRA } from '../../control-plane/api/usage-writer.js';
import { apiRoutes, createApp } from '../../control-plane/app.js';
import { decideClaimCharge } from '../../control-plane/claim-ledger/claim-charge.js';
import { createClaimLedger } from '../../control-plane/claim-ledger/claim-ledger.js';
import { type Listening, listen } from '../../control-plane/starters/http-listener.js';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { createReportRunner } from '../../db/reports.js';
import { createUsageStore } from '../../db/usage.js';
import { HttpUsageSink } from '../../node-agent/usage.js';
import { type SimApiServer, startApiServer } from '../../sim/apiserver/api-server.js';
import { kubeConfigFor } from '../../sim/kubeconfig.js';
import { claim, GiB } from '../support/node-agent/dra-claim.js';
import { type DraHarness, startDraHarness } from '../support/node-agent/dra-harness.js';
import type { FakeGpuSource } from '../support/node-agent/fake-gpu-source.js';
import { writeFakeProcess } from '../support/node-agent/fake-proc.js';

const NODE_AGENT = 'system:serviceaccount:vcuda-system:vcuda-node-agent';
const TRAINER_POD = '7c1d2e3f-0000-4000-8000-0000000000b1';
const NOTEBOOK_POD = '7c1d2e3f-0000-4000-8000-0000000000b2';
/** The agent's reporting period here: one report covers a minute. */
const PERIOD_S = 60;

type Report = { rows: Record<string, string | number | null>[] };

describe('usage of DRA claims from a DRA node agent over fake NVML', () => {
  const root = mkdtempSync(join(tmpdir(), 'dra-usage-'));
  let db: VcudaDb;
  let api: SimApiServer;
  let server: Listening;
  let h: DraHarness;
  // Both claims on gpu-1 of node-1, in namespace ml (team vision): the trainer's 40 cores, the notebook's 20.
  const train = claim('train', { namespace: 'ml' })
    .share('gpu-1', 40, 8 * GiB)
    .reservedFor(TRAINER_POD, 'trainer');
  const notebook = claim('notebook', { namespace: 'ml' })
    .share('gpu-1', 20, 4 * GiB)
    .reservedFor(NOTEBOOK_POD, 'notebook');

  beforeAll(async () => {
    db = await connectDb({});
    await migrate(db);
    api = await startApiServer({
      // The agent pod's projected token, as Kubernetes >= 1.30 reviews it: it speaks for node-1.
      tokens: { 'agent-token': { username: NODE_AGENT, groups: [], extra: { [NODE_NAME_EXTRA]: ['node-1'] } } },
    });
    const clock = () => new Date();
    const guard = requireCaller(cachedAuthenticator(tokenReview(kubeConfigFor(api.url))), [NODE_AGENT], 'usage');
    const ledger = createLedger(db, { clock });
    const app = createApp({
      api: apiRoutes(
        reportsRoutes({ reports: createReportRunner(db, { clock }) }),
        usageRoutes({
          clusterName: 'c1',
          usage: createUsageStore(db, { clock }),
          guard,
          pods: () => undefined,
          grants: () => undefined,
          claims: (holders) => ledger.claimShares('c1', holders),
          clock,
          samplePeriodS: PERIOD_S,
        }),
      ),
    });
    server = await listen(app, '127.0.0.1', 0);
    h = await startDraHarness({
      paths: { procRoot: join(root, 'proc') },
      // Sampling and reporting are driven by hand below, through the agent's own functions.
      config: { computePeriodMs: 0, usagePeriodMs: PERIOD_S * 1000, computeSensor: 'nvml' },
      usageSink: new HttpUsageSink(server.url, { token: async () => 'agent-token' }),
    });
    // The ledger knows node-1's cards (from its inventory) and the team; kube-scheduler allocated
    // both claims two minutes ago, which the charge hook charged.
    await ledger.upsertNode(
      'c1',
      'node-1',
      h.gpu.listCards().map((c) => ({ uuid: c.uuid, index: c.index, model: c.model, memoryMiB: 81_920 })),
    );
    await ledger.setTeam('vision', [{ cluster: 'c1', namespace: 'ml' }]);
    const charged = createClaimLedger({
      ledger: createLedger(db, { clock: () => new Date(Date.now() - 2 * PERIOD_S * 1000) }),
      cluster: 'c1',
      driver: DEFAULT_DRA_DRIVER,
    });
    for (const c of [train, notebook]) {
      h.api.putClaim(c.obj());
      await charged.apply(decideClaimCharge(undefined, draClaimSchema.parse(c.obj()), DEFAULT_DRA_DRIVER));
    }
  }, 60_000);

  afterAll(async () => {
    await h?.close();
    await server?.close();
    await api?.close();
    if (db) await closeDb(db);
    rmSync(root, { recursive: true, force: true });
  });

  const report = async (name: string, query: string): Promise<Report> => {
    const res = await fetch(`${server.url}/api/v1/reports/${name}?${query}`);
    expect(res.status).toBe(200);
    return (await res.json()) as Report;
  };

  it("shows the busy claim's measured use beside what it was allocated, and the other claim as idle", async () => {
    const answer = await h.kubelet.prepare('v1', [train.ref(), notebook.ref()]);
    expect(Object.values(answer.claims).map((c) => c.error)).toEqual(['', '']);
    // The trainer's process runs at 35 % of gpu-1 on the fake NVML; the notebook launches nothing.
    writeFakeProcess(join(root, 'proc'), { pid: 6101, podUid: TRAINER_POD, nsPid: 1 });
    (h.gpu as FakeGpuSource).samples.set(1, [
      { pid: 6101, timestampUs: (Date.now() + 1000) * 1000, smPercent: 35, memoryPercent: 0 },
    ]);
    h.agent.samplers[1]?.sampleOnce();
    await h.agent.reportUsage();

    // Used: 35 % of a card for the minute the report covers = 0.35 x 60 / 3600 GPU-hours.
    const hours = await report('gpu-hours', 'groupBy=team');
    const vision = hours.rows.filter((r) => r['team'] === 'vision');
    const sum = (column: string) => vision.reduce((s, r) => s + Number(r[column]), 0);
    expect(sum('usedGpuHours')).toBeCloseTo((0.35 * PERIOD_S) / 3600, 4);
    // Allocated: 60 cores for at least the two minutes since the charge.
    expect(sum('allocatedGpuHours')).toBeGreaterThanOrEqual((0.6 * 2 * PERIOD_S) / 3600 - 1e-4);
    const perNamespace = await report('gpu-hours', 'groupBy=namespace');
    expect(perNamespace.rows.every((r) => r['namespace'] === 'ml' && r['team'] === 'vision')).toBe(true);

    // Held over the last 90 s (the report's minute inside them), below 5 %: the notebook's claim, by name.
    const idle = await report('idle', 'idleForMinutes=1.5&idleBelowPct=5');
    expect(idle.rows.map((r) => [r['holder'], r['namespace'], r['pod'], r['core'], r['meanSmPct']])).toEqual([
      ['claim', 'ml', 'notebook', 20, 0],
    ]);
    const all = await report('idle', 'idleForMinutes=1.5&idleBelowPct=100');
    expect(all.rows.find((r) => r['pod'] === 'train')?.['meanSmPct']).toBe(35);
  }, 60_000);
});
