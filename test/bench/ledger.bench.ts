/**
 * The ledger on local PostgreSQL: reserve+release pairs per second with 8 clients over 64 cards,
 * with namespace and team quotas in force. The clients are one control plane's concurrent binds:
 * they share one ledger (its default settings, so group commit) with a pool of 8 connections.
 * In the same run, the database's own ceiling: one-row UPDATE transactions with the same number of
 * clients through the same driver, measured before and after the pairs, so
 * `ledger_commit_efficiency` (2 operations per pair over that ceiling) says how much of what this
 * PostgreSQL can commit the ledger turns into operations. Then the same clients with a ledger each
 * and one transaction per call (8 replicas), an audit for overcommit, and each report over a table
 * of generated allocation rows (`VCUDA_BENCH_LEDGER_ROWS`, default 10 million, made with
 * `generate_series`). `VCUDA_BENCH_LEDGER_SECONDS` (default 10) sets each timed phase.
 */
import { sql } from 'drizzle-orm';
import { VcudaError } from '../../contract/index.js';
import { closeDb, rawQueryOf, rowsOf, type VcudaDb } from '../../db/connect.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { findCardDrift, findOvercommit } from '../../db/ledger-audit.js';
import { runReport } from '../../db/reports.js';
import { createTestDatabase, isPostgresReachable, type TestDatabase } from '../support/db/test-databases.js';
import { atLeast, atMost, type Benchmark, type Figure } from './harness.js';

const CLIENTS = 8;
const PAIRS_DURATION_MS = Number(process.env.VCUDA_BENCH_LEDGER_SECONDS ?? 10) * 1000;

/**
 * The ceiling the ledger is judged against: each of `CLIENTS` clients (own connection, prepared
 * statement, postgres.js as the ledger uses it) commits one-row UPDATEs of its own row, one
 * transaction each, durable like the ledger's (`synchronous_commit` as the server has it).
 */
async function measureBaselineCommits(t: TestDatabase, log: (line: string) => void): Promise<number> {
  await t.db.execute(sql`create table if not exists bench_commit_baseline (id int primary key, n bigint not null)`);
  await t.db.execute(sql`truncate bench_commit_baseline`);
  await t.db.execute(sql`insert into bench_commit_baseline select i, 0 from generate_series(0, ${CLIENTS - 1}) i`);
  let commits = 0;
  const deadline = Date.now() + PAIRS_DURATION_MS;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, c) => {
      const query = rawQueryOf(await t.open(1));
      if (!query) throw new Error('the baseline needs the postgres.js driver');
      while (Date.now() < deadline) {
        await query('update bench_commit_baseline set n = n + 1 where id = $1', [c]);
        commits += 1;
      }
    }),
  );
  const perSecond = commits / ((performance.now() - started) / 1000);
  await t.db.execute(sql`drop table bench_commit_baseline`);
  log(`baseline: ${commits} one-row UPDATE transactions, ${perSecond.toFixed(0)}/s with ${CLIENTS} clients`);
  return perSecond;
}

/** How the 8 clients reach the ledger. */
type PairsMode =
  | 'shared' // one ledger, its default settings (group commit), a pool of 8: one control plane
  | 'per-call'; // a ledger each, one connection, one transaction per operation: 8 replicas

/** Sessions opened from now on count their calls of plpgsql functions (needs a superuser). */
async function countFunctionCalls(t: TestDatabase): Promise<void> {
  const [row] = rowsOf<{ db: string }>(await t.db.execute(sql`select current_database() as db`));
  await t.db.execute(sql.raw(`alter database "${row?.db}" set track_functions = 'pl'`));
}

/** Calls of vcuda_ledger_apply and the time spent in it, from pg_stat_user_functions. */
async function applyStats(t: TestDatabase): Promise<{ calls: number; totalMs: number }> {
  const rows = rowsOf<{ calls: number; total_time: number }>(
    await t.db.execute(sql`select calls, total_time from pg_stat_user_functions where funcname = 'vcuda_ledger_apply'`),
  );
  return { calls: Number(rows[0]?.calls ?? 0), totalMs: Number(rows[0]?.total_time ?? 0) };
}

async function seedPairs(t: TestDatabase, teamSize: number): Promise<string[]> {
  const admin = createLedger(t.db, { clock: () => new Date() });
  await t.db.execute(sql`truncate allocations, pod_holds, cards, nodes, quotas, team_namespaces`);
  const namespaces = Array.from({ length: CLIENTS }, (_, i) => `ns${i}`);
  for (let n = 0; n < 8; n++) {
    await admin.upsertNode(
      'c1',
      `node-${n}`,
      Array.from({ length: 8 }, (_, i) => ({ uuid: `GPU-${n}-${i}`, index: i, model: 'A100', memoryMiB: 40_000 })),
    );
  }
  for (const ns of namespaces) {
    await admin.setQuota({
      name: `q-${ns}`,
      scope: 'namespace',
      cluster: 'c1',
      namespace: ns,
      coreLimit: 2_000,
      memoryLimitMiB: 800_000,
    });
  }
  for (let first = 0; first < CLIENTS; first += teamSize) {
    const team = `team-${first / teamSize}`;
    const members = namespaces.slice(first, first + teamSize);
    await admin.setTeam(
      team,
      members.map((namespace) => ({ cluster: 'c1', namespace })),
    );
    await admin.setQuota({ name: team, scope: 'team', team, coreLimit: 6_400, memoryLimitMiB: 2_560_000 });
  }
  return namespaces;
}

/**
 * `teamSize` namespaces share each team quota. Every reservation and release locks its team's
 * quota row until it commits (WAL flush included), so one team over all 8 clients serialises
 * them all unless they share transactions: that is the worst case, measured separately.
 */
async function measurePairs(t: TestDatabase, teamSize: number, log: (line: string) => void, mode: PairsMode) {
  const namespaces = await seedPairs(t, teamSize);
  // Each run opens its own pools and closes them after: a closing session reports its function
  // counters, which it otherwise does at most once a second.
  const handles = mode === 'shared' ? [await t.open(CLIENTS)] : await Promise.all(namespaces.map(() => t.open(1)));
  const shared = mode === 'shared' ? createLedger(handles[0] as VcudaDb, { clock: () => new Date() }) : undefined;
  const ledgers = namespaces.map(
    (_, c) => shared ?? createLedger(handles[c] as VcudaDb, { clock: () => new Date(), groupCommit: false }),
  );

  let pairs = 0;
  let conflicts = 0;
  const statsBefore = await applyStats(t);
  const deadline = Date.now() + PAIRS_DURATION_MS;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  await Promise.all(
    namespaces.map(async (namespace, c) => {
      const ledger = ledgers[c] as Ledger;
      for (let i = 0; Date.now() < deadline; i++) {
        const uid = `${namespace}-${i}`;
        // Clients walk the cards at different strides, so they meet on the same cards often.
        const card = (c * 7 + i * 3) % 64;
        const node = `node-${Math.floor(card / 8)}`;
        const item = {
          container: 'main',
          cardUuid: `GPU-${Math.floor(card / 8)}-${card % 8}`,
          core: 40,
          memoryMiB: 8_000,
        };
        try {
          await ledger.reserve({ cluster: 'c1', podUid: uid, namespace, pod: uid, node, items: [item] });
        } catch (err) {
          if (!(err instanceof VcudaError)) throw err;
          conflicts += 1;
          continue;
        }
        await ledger.release('c1', uid);
        pairs += 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const overcommit = (await findOvercommit(t.db)).length + (await findCardDrift(t.db)).length;
  for (const handle of handles) await closeDb(handle);
  await new Promise((r) => setTimeout(r, 300)); // the closed sessions' exit, which reports their counters
  const statsAfter = await applyStats(t);
  const operations = 2 * pairs + conflicts;
  const calls = statsAfter.calls - statsBefore.calls;
  const perSecond = pairs / seconds;
  const result = {
    perSecond,
    overcommit,
    meanBatch: calls > 0 ? operations / calls : Number.NaN,
    functionUsPerOp: operations > 0 ? ((statsAfter.totalMs - statsBefore.totalMs) * 1000) / operations : Number.NaN,
    nodeUsPerOp: operations > 0 ? (cpu.user + cpu.system) / operations : Number.NaN,
  };
  log(
    `pairs (team of ${teamSize}, ${mode}): ${pairs} in ${seconds.toFixed(1)} s (${conflicts} refused), overcommit ${overcommit}; ` +
      `${result.meanBatch.toFixed(1)} operations per call, ${result.functionUsPerOp.toFixed(0)} us in the function and ` +
      `${result.nodeUsPerOp.toFixed(0)} us of this process's CPU per operation`,
  );
  return result;
}

/**
 * Where one reserve and one release spend their time, one client alone (no lock waits, so each
 * goes alone as a batch of one): the client's whole call, the server-side function's own run time
 * (`pg_stat_user_functions`, with `track_functions` on for this session: needs a superuser, as
 * the local server's `postgres` is), and an empty round trip (`select 1`). What is left of a call
 * after the function and the round trip is mostly its commit (the WAL flush).
 */
async function measureCallBreakdown(t: TestDatabase, log: (line: string) => void): Promise<Figure[]> {
  const CALLS = 500;
  await t.db.execute(sql`truncate allocations, pod_holds, cards, nodes, quotas, team_namespaces`);
  const admin = createLedger(t.db, { clock: () => new Date() });
  const cards = Array.from({ length: 8 }, (_, i) => ({
    uuid: `GPU-t${i}`,
    index: i,
    model: 'A100',
    memoryMiB: 80_000,
  }));
  await admin.upsertNode('c1', 'timed', cards);
  await admin.setQuota({
    name: 'q-t',
    scope: 'namespace',
    cluster: 'c1',
    namespace: 'ns',
    coreLimit: 10_000,
    memoryLimitMiB: 10_000_000,
  });
  await admin.setTeam('team-t', [{ cluster: 'c1', namespace: 'ns' }]);
  await admin.setQuota({
    name: 'team-t',
    scope: 'team',
    team: 'team-t',
    coreLimit: 10_000,
    memoryLimitMiB: 10_000_000,
  });
  const db = await t.open(1);
  const raw = rawQueryOf(db);
  if (!raw) throw new Error('the call breakdown needs the postgres.js driver');
  await raw("set track_functions = 'pl'", []);
  const ledger = createLedger(db, { clock: () => new Date() });
  /** Function time per call since the last look: this session's counters, flushed on request. */
  let seen = await applyStats(t);
  const functionMsPerCall = async () => {
    await raw('select pg_stat_force_next_flush()', []);
    const now = await applyStats(t);
    const perCall = now.calls > seen.calls ? (now.totalMs - seen.totalMs) / (now.calls - seen.calls) : Number.NaN;
    seen = now;
    return perCall;
  };
  let reserveMs = 0;
  let releaseMs = 0;
  let emptyMs = 0;
  // Every reservation first, then every release, so each kind's function time can be told apart.
  for (let i = 0; i < CALLS; i++) {
    const item = { container: 'main', cardUuid: `GPU-t${i % 8}`, core: 1, memoryMiB: 100 };
    let started = performance.now();
    await ledger.reserve({
      cluster: 'c1',
      podUid: `t${i}`,
      namespace: 'ns',
      pod: `t${i}`,
      node: 'timed',
      items: [item],
    });
    reserveMs += performance.now() - started;
    started = performance.now();
    await raw('select 1', []);
    emptyMs += performance.now() - started;
  }
  const reserveFunctionMs = await functionMsPerCall();
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    await ledger.release('c1', `t${i}`);
    releaseMs += performance.now() - started;
  }
  const releaseFunctionMs = await functionMsPerCall();
  const scenario = `one client alone, ${CALLS} pairs, 1 card per pod, namespace + team quota`;
  const figures: Figure[] = [
    { name: 'reserve_call_ms', value: round2(reserveMs / CALLS), unit: 'ms', scenario },
    {
      name: 'reserve_function_ms',
      value: round2(reserveFunctionMs),
      unit: 'ms',
      scenario: `${scenario}, server-side run time`,
    },
    { name: 'release_call_ms', value: round2(releaseMs / CALLS), unit: 'ms', scenario },
    {
      name: 'release_function_ms',
      value: round2(releaseFunctionMs),
      unit: 'ms',
      scenario: `${scenario}, server-side run time`,
    },
    { name: 'empty_round_trip_ms', value: round2(emptyMs / CALLS), unit: 'ms', scenario: `${scenario}, select 1` },
  ];
  log(`  call breakdown: ${figures.map((f) => `${f.name} ${f.value}`).join(', ')}`);
  return figures;
}

/** Bulk-loads `rows` allocations spread over the year before now; secondary indexes are rebuilt after. */
export async function generateRows(
  t: TestDatabase,
  rows: number,
  now: Date,
  log: (line: string) => void,
): Promise<void> {
  const db = t.db;
  const at = now.toISOString();
  const started = performance.now();
  await db.execute(
    sql`truncate allocations, allocation_days, pod_holds, cards, quotas, team_namespaces, usage_samples, usage_days`,
  );
  const indexes = rowsOf<{ indexname: string; indexdef: string }>(
    await db.execute(
      sql`select indexname, indexdef from pg_indexes where tablename = 'allocations' and indexname not like '%pkey'`,
    ),
  );
  for (const ix of indexes) await db.execute(sql.raw(`drop index ${ix.indexname}`));
  await db.execute(sql.raw('set synchronous_commit = off'));
  // One in a hundred rows reserved in the last 3 days is still held; the rest were released
  // after 1..48 hours. Integer hashes instead of random() keep every run identical.
  await db.execute(sql`
    insert into allocations (cluster, pod_uid, namespace, pod, container, node, card_uuid, gpu_model,
      core, memory_mib, state, reserved_at, bound_at, released_at)
    select 'c' || (i % 3), 'u' || i, 'ns' || (i % 200), 'pod-' || i, 'main', 'node-' || (i % 100),
      'GPU-' || (i % 800), case when i % 2 = 0 then 'A100' else 'T4' end,
      (1 + (i * 7919) % 10) * 10, 1000 + (i % 16) * 1000,
      case when live then 'bound' else 'released' end, ts, ts,
      case when live then null else ts + ((i * 104729) % 48 + 1) * interval '1 hour' end
    from (
      select i, ${at}::timestamptz - (i::float8 / ${rows}::float8) * interval '365 days' as ts,
        (i::float8 / ${rows}::float8) * 365 < 3 and i % 100 = 0 as live
      from generate_series(0::bigint, ${rows - 1}::bigint) as i
    ) g`);
  log(`  ${rows} allocation rows inserted in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  await db.execute(sql.raw("set maintenance_work_mem = '512MB'"));
  for (const ix of indexes) await db.execute(sql.raw(ix.indexdef));
  // What vcuda_release would have added to the daily roll-up, had these rows been released one by one.
  await db.execute(sql`select vcuda_rebuild_allocation_days()`);
  await db.execute(sql`
    insert into cards (uuid, cluster, node, index, model, memory_mib, core_used, memory_used_mib, updated_at)
    select 'GPU-' || i, 'c' || (i % 3), 'node-' || (i % 100), i / 100, case when i % 2 = 0 then 'A100' else 'T4' end,
      40000, (i * 37) % 101, least(40000, ((i * 53) % 41) * 1000), ${at}::timestamptz
    from generate_series(0, 799) as i`);
  await db.execute(sql`
    insert into team_namespaces (team, cluster, namespace)
    select 'team' || (n % 10), 'c' || c, 'ns' || n from generate_series(0, 99) n, generate_series(0, 2) c`);
  await db.execute(sql`
    insert into quotas (name, scope, cluster, namespace, team, core_limit, memory_limit_mib, updated_at)
    select 'q-c' || c || '-ns' || n, 'namespace', 'c' || c, 'ns' || n, null, 1000, 400000, ${at}::timestamptz
    from generate_series(0, 199) n, generate_series(0, 2) c
    union all
    select 'team' || t, 'team', null, null, 'team' || t, 5000, 2000000, ${at}::timestamptz from generate_series(0, 9) t`);
  // A million hourly usage rows over the last 8 days, and 6 recent samples per live allocation.
  await db.execute(sql`
    insert into usage_samples (cluster, namespace, pod_uid, container, card_uuid, sampled_at, period_s, sm_pct,
      memory_used_mib, resolution, samples)
    select 'c' || (i % 3), 'ns' || (i % 200), 'u' || (i * 7), 'main', 'GPU-' || (i % 800),
      date_trunc('hour', ${at}::timestamptz - (i::float8 / 1000000) * interval '8 days'), 3600, (i * 31) % 100,
      1000, 'hour', 360
    from generate_series(0::bigint, 999999::bigint) as i`);
  await db.execute(sql`
    insert into usage_samples (cluster, namespace, pod_uid, container, card_uuid, sampled_at, period_s, sm_pct,
      memory_used_mib, resolution, samples)
    select a.cluster, a.namespace, a.pod_uid, a.container, a.card_uuid,
      ${at}::timestamptz - k * interval '5 minutes', 300, case when (substr(a.pod_uid, 2)::bigint / 100) % 2 = 0 then 1 else 60 end, 1000, 'raw', 1
    from allocations a, generate_series(1, 6) k where a.state <> 'released'`);
  await db.execute(sql`select vcuda_rebuild_usage_days()`);
  await db.execute(sql`analyze`);
  log(`  generated in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

/**
 * The two other calls of a bind path: registering a node of 8 cards (once per node, one call of
 * `vcuda_upsert_node`) and confirming a reservation, one at a time and 16 in flight on a pool of
 * 8 connections, as the extender makes them; then `confirmMany` over the same number of pods.
 */
async function measureBindCalls(t: TestDatabase, log: (line: string) => void): Promise<Figure[]> {
  const NODES = 200;
  const PODS = 4_000;
  const IN_FLIGHT = 16;
  await t.db.execute(sql`truncate allocations, pod_holds, cards, nodes, quotas, team_namespaces`);
  const ledger = createLedger(await t.open(8), { clock: () => new Date() });
  const cardsOf = (n: number) =>
    Array.from({ length: 8 }, (_, i) => ({ uuid: `GPU-r${n}-${i}`, index: i, model: 'A100', memoryMiB: 80_000 }));
  let started = performance.now();
  for (let n = 0; n < NODES; n++) await ledger.upsertNode('c1', `reg-${n}`, cardsOf(n));
  const upsertMs = (performance.now() - started) / NODES;

  async function reservePods(prefix: string): Promise<string[]> {
    const uids = Array.from({ length: PODS }, (_, i) => `${prefix}-${i}`);
    await runInFlight(uids, IN_FLIGHT, async (uid, i) => {
      const node = i % NODES;
      const item = { container: 'main', cardUuid: `GPU-r${node}-${(i >> 8) % 8}`, core: 1, memoryMiB: 10 };
      await ledger.reserve({
        cluster: 'c1',
        podUid: uid,
        namespace: 'ns',
        pod: uid,
        node: `reg-${node}`,
        items: [item],
      });
    });
    return uids;
  }
  const serial = (await reservePods('s')).slice(0, 500);
  started = performance.now();
  for (const uid of serial) await ledger.confirm('c1', uid);
  const confirmSerialMs = (performance.now() - started) / serial.length;
  started = performance.now();
  const concurrent = await reservePods('c');
  const reservePerSecond = PODS / ((performance.now() - started) / 1000);
  started = performance.now();
  await runInFlight(concurrent, IN_FLIGHT, (uid) => ledger.confirm('c1', uid));
  const confirmPerSecond = PODS / ((performance.now() - started) / 1000);
  const batched = await reservePods('b');
  started = performance.now();
  const batches = Array.from({ length: PODS / 50 }, (_, i) => batched.slice(i * 50, i * 50 + 50));
  await runInFlight(batches, IN_FLIGHT, async (uids) => {
    const { missing } = await ledger.confirmMany('c1', uids);
    if (missing.length > 0) throw new Error(`confirmMany missed ${missing.length} pods`);
  });
  const confirmManyPerSecond = PODS / ((performance.now() - started) / 1000);
  log(
    `  upsertNode ${upsertMs.toFixed(2)} ms per 8-card node; confirm ${confirmSerialMs.toFixed(2)} ms one at a time, ` +
      `${confirmPerSecond.toFixed(0)}/s ${IN_FLIGHT} in flight; reserve ${reservePerSecond.toFixed(0)}/s; confirmMany ${confirmManyPerSecond.toFixed(0)} pods/s`,
  );
  return [
    {
      name: 'node_upsert_ms',
      value: round2(upsertMs),
      unit: 'ms',
      scenario: `${NODES} nodes x 8 cards, one at a time`,
    },
    {
      name: 'reserve_per_s',
      value: Math.round(reservePerSecond),
      unit: 'pods/s',
      scenario: `one card per pod, ${IN_FLIGHT} in flight, pool of 8 connections`,
    },
    { name: 'confirm_ms', value: round2(confirmSerialMs), unit: 'ms', scenario: 'one confirm at a time' },
    {
      name: 'confirm_per_s',
      value: Math.round(confirmPerSecond),
      unit: 'pods/s',
      scenario: `${IN_FLIGHT} in flight, pool of 8 connections`,
    },
    {
      name: 'confirm_many_pods_per_s',
      value: Math.round(confirmManyPerSecond),
      unit: 'pods/s',
      scenario: `confirmMany, 50 pods per call, ${IN_FLIGHT} calls in flight`,
    },
  ];
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/** Runs `task` over `items` with at most `inFlight` pending at once. */
async function runInFlight<T>(items: readonly T[], inFlight: number, task: (item: T, i: number) => Promise<unknown>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < items.length) {
        const i = next++;
        await task(items[i] as T, i);
      }
    }),
  );
}

async function measureReports(t: TestDatabase, rows: number, log: (line: string) => void): Promise<Figure[]> {
  const now = new Date();
  await generateRows(t, rows, now, log);
  const scenario = `${(rows / 1e6).toFixed(rows >= 1e6 ? 0 : 2)} M allocation rows, 7-day window`;
  const figures: Figure[] = [];
  const cases: [string, string, Record<string, string>][] = [
    ['report_gpu_hours_ms', 'gpu-hours', {}],
    ['report_gpu_hours_team_ms', 'gpu-hours', { groupBy: 'team' }],
    ['report_quota_usage_ms', 'quota-usage', {}],
    ['report_idle_ms', 'idle', {}],
    ['report_fragmentation_ms', 'fragmentation', {}],
    ['report_top_consumers_ms', 'top-consumers', {}],
  ];
  for (const [figure, name, params] of cases) {
    const times: number[] = [];
    let resultRows = 0;
    for (let i = 0; i < 4; i++) {
      const started = performance.now();
      const r = await runReport(t.db, name, params, () => now);
      if (i > 0) times.push(performance.now() - started); // the first run warms the cache
      resultRows = r.rows.length;
    }
    const median = times.sort((a, b) => a - b)[1] as number;
    log(`  ${name} ${JSON.stringify(params)}: ${median.toFixed(0)} ms, ${resultRows} rows`);
    figures.push({ name: figure, value: Math.round(median), unit: 'ms', scenario, ...atMost(median, 1_000) });
  }
  return figures;
}

type PairsResult = Awaited<ReturnType<typeof measurePairs>>;

/** The pairs figures: one ledger shared by the clients (the headline), and one ledger each. */
function pairFigures(
  baseline: number,
  runs: { spread: PairsResult; oneTeam: PairsResult; spreadPerCall: PairsResult; oneTeamPerCall: PairsResult },
): Figure[] {
  const { spread, oneTeam, spreadPerCall, oneTeamPerCall } = runs;
  const efficiency = (2 * spread.perSecond) / baseline;
  const hotQuotaRatio = oneTeam.perSecond / spread.perSecond;
  const overcommit = spread.overcommit + oneTeam.overcommit + spreadPerCall.overcommit + oneTeamPerCall.overcommit;
  const shared = '8 clients sharing one ledger (one control plane, default settings: group commit)';
  const sameRun = 'group commit is the default now: the same run as';
  return [
    {
      name: 'pairs_per_s',
      value: Math.round(spread.perSecond),
      unit: 'pairs/s',
      scenario: `${shared}, 64 cards, namespace quotas + 4 team quotas`,
      ...atLeast(spread.perSecond, 3_000),
    },
    {
      name: 'pairs_per_s_one_team',
      value: Math.round(oneTeam.perSecond),
      unit: 'pairs/s',
      scenario: 'same, all 8 clients under one team quota',
    },
    {
      name: 'baseline_commits_per_s',
      value: Math.round(baseline),
      unit: 'tx/s',
      scenario: `${CLIENTS} clients, one-row UPDATE per transaction, postgres.js, same run (mean of before and after)`,
    },
    {
      name: 'ledger_commit_efficiency',
      value: round2(efficiency),
      unit: 'ratio',
      scenario: '2 x pairs/s / baseline tx/s (spread case)',
      ...atLeast(round2(efficiency), 0.5),
    },
    {
      name: 'one_team_over_spread',
      value: round2(hotQuotaRatio),
      unit: 'ratio',
      scenario: 'pairs/s, one team quota / spread',
      ...atLeast(round2(hotQuotaRatio), 0.7),
    },
    {
      name: 'ledger_operations_per_call',
      value: round2(spread.meanBatch),
      unit: 'ops',
      scenario: 'spread case: reservations and releases per call of vcuda_ledger_apply (one transaction)',
    },
    {
      name: 'ledger_function_us_per_op',
      value: Math.round(spread.functionUsPerOp),
      unit: 'us',
      scenario: 'spread case: server-side run time of vcuda_ledger_apply per operation',
    },
    {
      name: 'ledger_client_cpu_us_per_op',
      value: Math.round(spread.nodeUsPerOp),
      unit: 'us',
      scenario: 'spread case: CPU of the benchmark process (ledger, driver, clients) per operation',
    },
    {
      name: 'pairs_per_s_grouped',
      value: Math.round(spread.perSecond),
      unit: 'pairs/s',
      scenario: `${sameRun} pairs_per_s`,
    },
    {
      name: 'pairs_per_s_one_team_grouped',
      value: Math.round(oneTeam.perSecond),
      unit: 'pairs/s',
      scenario: `${sameRun} pairs_per_s_one_team`,
    },
    {
      name: 'ledger_commit_efficiency_grouped',
      value: round2(efficiency),
      unit: 'ratio',
      scenario: `${sameRun} ledger_commit_efficiency`,
    },
    {
      name: 'one_team_over_spread_grouped',
      value: round2(hotQuotaRatio),
      unit: 'ratio',
      scenario: `${sameRun} one_team_over_spread`,
    },
    {
      name: 'pairs_per_s_per_call',
      value: Math.round(spreadPerCall.perSecond),
      unit: 'pairs/s',
      scenario: '8 clients with a ledger and a connection each (8 replicas), one transaction per operation',
    },
    {
      name: 'pairs_per_s_one_team_per_call',
      value: Math.round(oneTeamPerCall.perSecond),
      unit: 'pairs/s',
      scenario: 'same, all 8 clients under one team quota',
    },
    {
      name: 'ledger_commit_efficiency_per_call',
      value: round2((2 * spreadPerCall.perSecond) / baseline),
      unit: 'ratio',
      scenario: '2 x per-call pairs/s / baseline tx/s (spread case)',
    },
    {
      name: 'overcommit',
      value: overcommit,
      unit: 'cards+quotas',
      scenario: 'audit after all four runs',
      ...atMost(overcommit, 0),
    },
  ];
}

const bench: Benchmark = {
  name: 'ledger',
  description:
    'Quota ledger on local PostgreSQL: reserve+release pairs/s with 8 clients (sharing one ledger, so group commit; and with a ledger each, one transaction per call), against a one-row-UPDATE baseline from the same run, overcommit audit, node registration and confirm (the bind path), and report latency (median of 3 warm runs) over generated allocation rows.',
  async run({ log }) {
    if (!(await isPostgresReachable())) throw new Error('the ledger benchmark needs PostgreSQL at 127.0.0.1:5432');
    const rows = Number(process.env.VCUDA_BENCH_LEDGER_ROWS ?? 10_000_000);
    const t = await createTestDatabase('postgres');
    try {
      await countFunctionCalls(t);
      // The baseline before and after the ledger's own runs: the machine's load drifts.
      const baselineBefore = await measureBaselineCommits(t, log);
      const spread = await measurePairs(t, 2, log, 'shared');
      const oneTeam = await measurePairs(t, CLIENTS, log, 'shared');
      const baseline = (baselineBefore + (await measureBaselineCommits(t, log))) / 2;
      const spreadPerCall = await measurePairs(t, 2, log, 'per-call');
      const oneTeamPerCall = await measurePairs(t, CLIENTS, log, 'per-call');
      const figures = pairFigures(baseline, { spread, oneTeam, spreadPerCall, oneTeamPerCall });
      figures.push(...(await measureCallBreakdown(t, log)));
      figures.push(...(await measureBindCalls(t, log)));
      figures.push(...(await measureReports(t, rows, log)));
      return figures;
    } finally {
      await t.drop();
    }
  },
};

export default bench;
