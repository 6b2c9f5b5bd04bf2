/**
 * Reports against a small fixture whose answers were computed by hand (see each expectation).
 * Window: 2026-03-01T00:00Z .. 2026-03-03T00:00Z, now 2026-03-02T12:00Z.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../test/support/db/test-databases.js';
import { createLedger } from './ledger.js';
import { formatCsv, runReport } from './reports.js';

const kinds = await testDbKinds();
const at = (s: string) => new Date(`2026-${s}Z`);
const NOW = at('03-02T12:00:00');
const window = { since: '2026-03-01', until: '2026-03-03T00:00:00Z' };

describe.each(kinds)('reports on %s', (kind) => {
  let t: TestDatabase;
  const clock = () => NOW;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    let now = NOW;
    const ledger = createLedger(t.db, { clock: () => now });
    await ledger.upsertNode('c1', 'n1', [
      { uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 },
      { uuid: 'GPU-b', index: 1, model: 'T4', memoryMiB: 16_000 },
      { uuid: 'GPU-c', index: 2, model: 'T4', memoryMiB: 16_000 },
    ]);
    await ledger.upsertNode('c2', 'm1', [{ uuid: 'GPU-z', index: 0, model: 'A100', memoryMiB: 40_000 }]);
    await ledger.setTeam('vision', [
      { cluster: 'c1', namespace: 'ml' },
      { cluster: 'c2', namespace: 'ml2' },
    ]);
    await ledger.setQuota({
      name: 'ml-q',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 200,
      memoryLimitMiB: 40_000,
    });
    await ledger.setQuota({ name: 'vision-q', scope: 'team', team: 'vision', coreLimit: 300, memoryLimitMiB: 100_000 });
    const reserve = async (
      when: string,
      uid: string,
      cluster: string,
      namespace: string,
      node: string,
      card: string,
      core: number,
      memoryMiB: number,
    ) => {
      now = at(when);
      await ledger.reserve({
        cluster,
        podUid: uid,
        namespace,
        pod: uid,
        node,
        items: [{ container: 'main', cardUuid: card, core, memoryMiB }],
      });
    };
    const release = async (when: string, cluster: string, uid: string) => {
      now = at(when);
      await ledger.release(cluster, uid);
    };
    // p1: 50 core, 22:00 the day before .. 02:00 -> 2 h x 0.5 = 1.0 GPU-h on 03-01.
    await reserve('02-28T22:00:00', 'p1', 'c1', 'ml', 'n1', 'GPU-a', 50, 10_000);
    await release('03-01T02:00:00', 'c1', 'p1');
    // q1: 40 core, 06:00 .. 18:00 -> 12 h x 0.4 = 4.8 GPU-h on 03-01 (cluster c2).
    await reserve('03-01T06:00:00', 'q1', 'c2', 'ml2', 'm1', 'GPU-z', 40, 2_000);
    await release('03-01T18:00:00', 'c2', 'q1');
    // p2: a whole card from 20:00, live -> 4 GPU-h on 03-01, 12 on 03-02.
    await reserve('03-01T20:00:00', 'p2', 'c1', 'ml', 'n1', 'GPU-b', 100, 16_000);
    // p3: 25 core from midnight, live -> 12 h x 0.25 = 3 GPU-h on 03-02.
    await reserve('03-02T00:00:00', 'p3', 'c1', 'ops', 'n1', 'GPU-a', 25, 4_000);
    // p4: all of GPU-c's memory, 30 core, reserved just now -> 0 GPU-h; strands 70 core.
    await reserve('03-02T12:00:00', 'p4', 'c1', 'ops', 'n1', 'GPU-c', 30, 16_000);
    const sample = (
      cluster: string,
      namespace: string,
      podUid: string,
      cardUuid: string,
      when: string,
      periodS: number,
      smPct: number,
    ) => ({
      cluster,
      namespace,
      podUid,
      container: 'main',
      cardUuid,
      sampledAt: at(when),
      periodS,
      smPct,
      memoryUsedMiB: 1_000,
    });
    await ledger.recordUsage([
      sample('c1', 'ml', 'p2', 'GPU-b', '03-02T11:00:00', 3600, 80), // 0.8 GPU-h used
      sample('c1', 'ops', 'p3', 'GPU-a', '03-02T11:30:00', 900, 4), // 0.01
      sample('c1', 'ops', 'p3', 'GPU-a', '03-02T11:45:00', 900, 4), // 0.01
      sample('c2', 'ml2', 'q1', 'GPU-z', '03-01T10:00:00', 3600, 50), // 0.5
    ]);
    // Bursts, at 0 % SM so no other report moves: p2 peaks at 5000 MiB, 1000 of it on the host,
    // and has some on the host for 600 + 300 s; p3 bursts 100 MiB, all on the card; q1 (c2,
    // released) 700 MiB all on the host for 60 s.
    const burst = (s: ReturnType<typeof sample>, mib: number, evictedMiB: number) => ({
      ...s,
      memoryBurstMiB: mib,
      memoryBurstEvictedMiB: evictedMiB,
      burstEvicted: evictedMiB > 0,
    });
    await ledger.recordUsage([
      burst(sample('c1', 'ml', 'p2', 'GPU-b', '03-02T09:00:00', 600, 0), 3000, 0),
      burst(sample('c1', 'ml', 'p2', 'GPU-b', '03-02T09:10:00', 600, 0), 5000, 1000),
      burst(sample('c1', 'ml', 'p2', 'GPU-b', '03-02T09:20:00', 300, 0), 2000, 500),
      burst(sample('c1', 'ops', 'p3', 'GPU-a', '03-02T10:00:00', 900, 0), 100, 0),
      burst(sample('c2', 'ml2', 'q1', 'GPU-z', '03-01T12:00:00', 60, 0), 700, 700),
    ]);
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('gpu-hours per day and namespace', async () => {
    const r = await runReport(t.db, 'gpu-hours', window, clock);
    expect(r.columns).toEqual(['day', 'cluster', 'namespace', 'team', 'allocatedGpuHours', 'usedGpuHours']);
    expect(r.rows).toEqual([
      { day: '2026-03-01', cluster: 'c1', namespace: 'ml', team: 'vision', allocatedGpuHours: 5, usedGpuHours: 0 },
      { day: '2026-03-01', cluster: 'c2', namespace: 'ml2', team: 'vision', allocatedGpuHours: 4.8, usedGpuHours: 0.5 },
      { day: '2026-03-02', cluster: 'c1', namespace: 'ml', team: 'vision', allocatedGpuHours: 12, usedGpuHours: 0.8 },
      { day: '2026-03-02', cluster: 'c1', namespace: 'ops', team: '', allocatedGpuHours: 3, usedGpuHours: 0.02 },
    ]);
  });

  it('gpu-hours over a window inside one day, read from the rows and the samples', async () => {
    // 11:40..12:00: p2 100 core x 1/3 h, p3 25 core x 1/3 h; only p3's 11:45 sample (900 s at 4 %).
    const r = await runReport(
      t.db,
      'gpu-hours',
      { since: '2026-03-02T11:40:00Z', until: '2026-03-02T12:00:00Z' },
      clock,
    );
    expect(r.rows).toEqual([
      { day: '2026-03-02', cluster: 'c1', namespace: 'ml', team: 'vision', allocatedGpuHours: 0.3333, usedGpuHours: 0 },
      { day: '2026-03-02', cluster: 'c1', namespace: 'ops', team: '', allocatedGpuHours: 0.0833, usedGpuHours: 0.01 },
    ]);
  });

  it('gpu-hours per team and per cluster, and filtered to one cluster', async () => {
    const team = await runReport(t.db, 'gpu-hours', { ...window, groupBy: 'team' }, clock);
    expect(team.rows).toEqual([
      { day: '2026-03-01', team: 'vision', allocatedGpuHours: 9.8, usedGpuHours: 0.5 },
      { day: '2026-03-02', team: '', allocatedGpuHours: 3, usedGpuHours: 0.02 },
      { day: '2026-03-02', team: 'vision', allocatedGpuHours: 12, usedGpuHours: 0.8 },
    ]);
    const cluster = await runReport(t.db, 'gpu-hours', { ...window, groupBy: 'cluster' }, clock);
    expect(cluster.rows).toEqual([
      { day: '2026-03-01', cluster: 'c1', allocatedGpuHours: 5, usedGpuHours: 0 },
      { day: '2026-03-01', cluster: 'c2', allocatedGpuHours: 4.8, usedGpuHours: 0.5 },
      { day: '2026-03-02', cluster: 'c1', allocatedGpuHours: 15, usedGpuHours: 0.82 },
    ]);
    const c2 = await runReport(t.db, 'gpu-hours', { ...window, cluster: 'c2' }, clock);
    expect(c2.rows).toEqual([
      { day: '2026-03-01', cluster: 'c2', namespace: 'ml2', team: 'vision', allocatedGpuHours: 4.8, usedGpuHours: 0.5 },
    ]);
    // A window that starts at 01:00 cuts p1 to 1 h x 0.5.
    const late = await runReport(
      t.db,
      'gpu-hours',
      { since: '2026-03-01T01:00:00Z', until: '2026-03-01T03:00:00Z' },
      clock,
    );
    expect(late.rows).toEqual([
      { day: '2026-03-01', cluster: 'c1', namespace: 'ml', team: 'vision', allocatedGpuHours: 0.5, usedGpuHours: 0 },
    ]);
  });

  it('keeps the daily roll-ups filled by releases and samples equal to ones rebuilt from the rows', async () => {
    const before = await runReport(t.db, 'gpu-hours', window, clock);
    const rollup = sql`select cluster, namespace, day, round(gpu_seconds) as s from allocation_days order by 1, 2, 3`;
    const byRelease = await t.db.execute(rollup);
    await t.db.execute(sql`select vcuda_rebuild_allocation_days()`);
    expect(await t.db.execute(rollup)).toEqual(byRelease);
    const usage = sql`select cluster, namespace, day, round(used_gpu_seconds) as s from usage_days order by 1, 2, 3`;
    const bySamples = await t.db.execute(usage);
    await t.db.execute(sql`select vcuda_rebuild_usage_days()`);
    expect(await t.db.execute(usage)).toEqual(bySamples);
    expect(await runReport(t.db, 'gpu-hours', window, clock)).toEqual(before);
  });

  it('usage vs quota now', async () => {
    const r = await runReport(t.db, 'quota-usage', {}, clock);
    expect(r.rows).toEqual([
      {
        quota: 'ml-q',
        scope: 'namespace',
        subject: 'c1/ml',
        gpuModel: '',
        coreLimit: 200,
        coreUsed: 100,
        corePct: 50,
        memoryLimitMiB: 40_000,
        memoryUsedMiB: 16_000,
        memoryPct: 40,
      },
      {
        quota: 'vision-q',
        scope: 'team',
        subject: 'vision',
        gpuModel: '',
        coreLimit: 300,
        coreUsed: 100,
        corePct: 33.3,
        memoryLimitMiB: 100_000,
        memoryUsedMiB: 16_000,
        memoryPct: 16,
      },
    ]);
  });

  it('idle allocations: held 30 min with a mean SM share under 5 %', async () => {
    const r = await runReport(t.db, 'idle', { idleBelowPct: 5, idleForMinutes: 30 }, clock);
    // p3: 4 % over 11:30..12:00. p2 has no sample in the last 30 min; p4 is new.
    expect(r.rows).toEqual([
      {
        cluster: 'c1',
        namespace: 'ops',
        holder: 'pod',
        pod: 'p3',
        container: 'main',
        node: 'n1',
        card: 'GPU-a',
        core: 25,
        memoryMiB: 4_000,
        heldSince: '2026-03-02T00:00:00Z',
        meanSmPct: 4,
        samples: 2,
      },
    ]);
    expect((await runReport(t.db, 'idle', { idleBelowPct: 2 }, clock)).rows).toEqual([]);
  });

  it('fragmentation: partly used cards and what is stranded on them', async () => {
    const r = await runReport(t.db, 'fragmentation', {}, clock);
    expect(r.rows).toEqual([
      {
        cluster: 'c1',
        node: 'n1',
        card: 'GPU-a',
        model: 'A100',
        coreFree: 75,
        memoryFreeMiB: 36_000,
        strandedCore: 0,
        strandedMemoryMiB: 0,
      },
      {
        cluster: 'c1',
        node: 'n1',
        card: 'GPU-c',
        model: 'T4',
        coreFree: 70,
        memoryFreeMiB: 0,
        strandedCore: 70,
        strandedMemoryMiB: 0,
      },
    ]);
  });

  it('top consumers by GPU-hours allocated, with efficiency', async () => {
    const r = await runReport(t.db, 'top-consumers', { ...window, limit: 2 }, clock);
    expect(r.rows).toEqual([
      { cluster: 'c1', namespace: 'ml', team: 'vision', allocatedGpuHours: 17, usedGpuHours: 0.8, efficiencyPct: 4.7 },
      {
        cluster: 'c2',
        namespace: 'ml2',
        team: 'vision',
        allocatedGpuHours: 4.8,
        usedGpuHours: 0.5,
        efficiencyPct: 10.4,
      },
    ]);
  });

  it('writes CSV with a header and quoted cells where needed', async () => {
    const r = await runReport(t.db, 'top-consumers', window, clock);
    expect(formatCsv(r)).toBe(
      'cluster,namespace,team,allocatedGpuHours,usedGpuHours,efficiencyPct\r\n' +
        'c1,ml,vision,17,0.8,4.7\r\nc2,ml2,vision,4.8,0.5,10.4\r\nc1,ops,,3,0.02,0.7\r\n',
    );
    expect(formatCsv({ columns: ['a'], rows: [{ a: 'x,"y"' }, { a: null }] })).toBe('a\r\n"x,""y"""\r\n\r\n');
  });

  it('burst per pod: peak burst, peak on the host, seconds with some on the host', async () => {
    const r = await runReport(t.db, 'burst', window, clock);
    expect(r.columns).toEqual([
      'cluster',
      'namespace',
      'team',
      'pod',
      'peakBurstMiB',
      'peakEvictedMiB',
      'evictedSeconds',
    ]);
    expect(r.rows).toEqual([
      {
        cluster: 'c1',
        namespace: 'ml',
        team: 'vision',
        pod: 'p2',
        peakBurstMiB: 5000,
        peakEvictedMiB: 1000,
        evictedSeconds: 900,
      },
      {
        cluster: 'c2',
        namespace: 'ml2',
        team: 'vision',
        pod: 'q1',
        peakBurstMiB: 700,
        peakEvictedMiB: 700,
        evictedSeconds: 60,
      },
      { cluster: 'c1', namespace: 'ops', team: '', pod: 'p3', peakBurstMiB: 100, peakEvictedMiB: 0, evictedSeconds: 0 },
    ]);
    const lastDay = await runReport(t.db, 'burst', { ...window, since: '2026-03-02', cluster: 'c1' }, clock);
    expect(lastDay.rows.map((row) => row.pod)).toEqual(['p2', 'p3']);
  });

  it('burst summed per namespace and per team', async () => {
    const byNamespace = await runReport(t.db, 'burst', { ...window, groupBy: 'namespace' }, clock);
    expect(byNamespace.rows).toEqual([
      { cluster: 'c1', namespace: 'ml', team: 'vision', burstingPods: 1, peakBurstMiB: 5000, evictedSeconds: 900 },
      { cluster: 'c1', namespace: 'ops', team: '', burstingPods: 1, peakBurstMiB: 100, evictedSeconds: 0 },
      { cluster: 'c2', namespace: 'ml2', team: 'vision', burstingPods: 1, peakBurstMiB: 700, evictedSeconds: 60 },
    ]);
    const byTeam = await runReport(t.db, 'burst', { ...window, groupBy: 'team' }, clock);
    expect(byTeam.rows).toEqual([
      { team: '', burstingPods: 1, peakBurstMiB: 100, evictedSeconds: 0 },
      { team: 'vision', burstingPods: 2, peakBurstMiB: 5000, evictedSeconds: 960 },
    ]);
  });

  it('refuses unknown reports and bad parameters with the field named', async () => {
    await expect(runReport(t.db, 'nope', {}, clock)).rejects.toMatchObject({ code: 'not-found' });
    await expect(runReport(t.db, 'gpu-hours', { since: 'yesterday' }, clock)).rejects.toMatchObject({
      code: 'invalid',
      message: expect.stringMatching(/since/),
    });
    await expect(
      runReport(t.db, 'gpu-hours', { since: '2026-03-02', until: '2026-03-01' }, clock),
    ).rejects.toMatchObject({
      code: 'invalid',
    });
    await expect(runReport(t.db, 'gpu-hours', { groupBy: 'pod' as 'team' }, clock)).rejects.toMatchObject({
      code: 'invalid',
    });
  });
});
