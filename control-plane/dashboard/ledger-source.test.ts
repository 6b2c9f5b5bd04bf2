/**
 * The dashboard's ledger adapter on a real ledger (PGlite always, PostgreSQL when it is up):
 * what was reserved shows on the right card, quotas and reports come through with their numbers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimHolderId } from '../../contract/index.js';
import { createLedger } from '../../db/ledger.js';
import { createReportRunner } from '../../db/reports.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../../test/support/db/test-databases.js';
import { BURST_FRESH_MS, createLedgerDashboardSource, groupCapacity, quotaFromReport } from './ledger-source.js';
import { buildOverview } from './overview.js';

const kinds = await testDbKinds();
const NOW = new Date('2026-03-02T12:00:00.000Z');
const HOUR = 3_600_000;

describe.each(kinds)('ledger dashboard source on %s', (kind) => {
  let t: TestDatabase;
  let clockMs = NOW.getTime() - 4 * HOUR;
  const clock = () => new Date(clockMs);

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    const ledger = createLedger(t.db, { clock });
    await ledger.upsertNode('west', 'node-a', [
      { uuid: 'GPU-a0', index: 0, model: 'A100', memoryMiB: 40960 },
      { uuid: 'GPU-a1', index: 1, model: 'A100', memoryMiB: 40960 },
    ]);
    await ledger.upsertNode('east', 'node-b', [{ uuid: 'GPU-b0', index: 0, model: 'T4', memoryMiB: 15360 }]);
    await ledger.setQuota({
      name: 'ml-west',
      scope: 'namespace',
      cluster: 'west',
      namespace: 'ml',
      coreLimit: 200,
      memoryLimitMiB: 65536,
    });
    await ledger.setTeam('vision', [{ cluster: 'west', namespace: 'ml' }]);
    await ledger.setQuota({ name: 'vision', scope: 'team', team: 'vision', coreLimit: 400, memoryLimitMiB: 131072 });
    await ledger.reserve({
      cluster: 'west',
      podUid: 'u1',
      namespace: 'ml',
      pod: 'train',
      node: 'node-a',
      items: [
        { container: 'main', cardUuid: 'GPU-a0', core: 30, memoryMiB: 8192 },
        { container: 'side', cardUuid: 'GPU-a0', core: 10, memoryMiB: 1024 },
      ],
    });
    await ledger.confirm('west', 'u1');
    await ledger.reserve({
      cluster: 'east',
      podUid: 'u2',
      namespace: 'web',
      pod: 'serve',
      node: 'node-b',
      items: [{ container: 'main', cardUuid: 'GPU-b0', core: 100, memoryMiB: 15360 }],
    });
    clockMs = NOW.getTime();
    // A DRA claim's share, charged as the claim hook does (holder claim:<uid>, the claim's name).
    await ledger.reserve({
      cluster: 'west',
      podUid: claimHolderId('c-1'),
      namespace: 'ml',
      pod: 'finetune',
      node: 'node-a',
      items: [{ container: 'gpu/share-1', cardUuid: 'GPU-a1', core: 25, memoryMiB: 4096 }],
    });
    await ledger.confirm('west', claimHolderId('c-1'));
    await ledger.recordUsage([
      {
        cluster: 'west',
        namespace: 'ml',
        podUid: 'u1',
        container: 'main',
        cardUuid: 'GPU-a0',
        sampledAt: new Date(NOW.getTime() - HOUR / 3),
        periodS: 1200,
        smPct: 3,
        memoryUsedMiB: 100,
      },
    ]);
    clockMs = NOW.getTime();
  });

  afterAll(async () => {
    await t?.drop();
  });

  const source = (idleForMinutes?: number) =>
    createLedgerDashboardSource({
      db: t.db,
      reports: createReportRunner(t.db, { clock }),
      clock,
      readRefusals: async () => [],
      ...(idleForMinutes ? { idleForMinutes } : {}),
    });

  it('puts each live allocation on its card, clusters and nodes from the ledger', async () => {
    const clusters = await source().readClusters();
    const o = buildOverview({
      clusters,
      quotas: [],
      reports: { gpuHours: [], idle: [] },
      refusals: [],
      window: { from: new Date(NOW.getTime() - HOUR), to: NOW },
      now: NOW,
    });
    expect(o.clusters.map((c) => [c.name, c.nodes.map((n) => n.name)])).toEqual([
      ['east', ['node-b']],
      ['west', ['node-a']],
    ]);
    const west = o.clusters[1]?.nodes[0]?.cards ?? [];
    expect(west.map((c) => [c.uuid, c.coreUsed, c.memoryUsedMiB])).toEqual([
      ['GPU-a0', 40, 9216],
      ['GPU-a1', 25, 4096],
    ]);
    expect(west[0]?.pods).toEqual([
      { holder: 'pod', namespace: 'ml', pod: 'train', core: 40, memoryMiB: 9216, state: 'bound' },
    ]);
    expect(west[1]?.pods).toEqual([
      { holder: 'claim', namespace: 'ml', pod: 'finetune', core: 25, memoryMiB: 4096, state: 'bound' },
    ]);
    expect(o.clusters[0]?.nodes[0]?.cards[0]?.pods).toEqual([
      { holder: 'pod', namespace: 'web', pod: 'serve', core: 100, memoryMiB: 15360, state: 'reserved' },
    ]);
  });

  it('knows the clusters the ledger registered and the one it watches, nothing else', async () => {
    expect(await source().readClusterNames()).toEqual(['east', 'west']);
    const watching = createLedgerDashboardSource({
      db: t.db,
      reports: createReportRunner(t.db, { clock }),
      clock,
      readRefusals: async () => [],
      readLiveNodes: () => [{ cluster: 'north', node: 'idle-1', cards: [] }],
    });
    expect(await watching.readClusterNames()).toEqual(['east', 'north', 'west']);
  });

  it('hides cards gone from their node unless pods still hold them', async () => {
    const ledger = createLedger(t.db, { clock });
    await ledger.upsertNode('west', 'node-a', [{ uuid: 'GPU-a1', index: 1, model: 'A100', memoryMiB: 40960 }]);
    const clusters = await source().readClusters();
    const cards = clusters.find((c) => c.name === 'west')?.nodes[0]?.cards ?? [];
    expect(cards.map((c) => [c.uuid, c.healthy])).toEqual([
      ['GPU-a0', false],
      ['GPU-a1', undefined],
    ]);
    await ledger.upsertNode('west', 'node-a', [
      { uuid: 'GPU-a0', index: 0, model: 'A100', memoryMiB: 40960 },
      { uuid: 'GPU-a1', index: 1, model: 'A100', memoryMiB: 40960 },
    ]);
  });

  it('reads namespace and team quotas with what they hold', async () => {
    const quotas = await source().readQuotas();
    expect(quotas).toEqual([
      {
        scope: 'namespace',
        name: 'ml',
        cluster: 'west',
        coreLimit: 200,
        // train's 40 core and 9216 MiB, and the claim finetune's 25 core and 4096 MiB.
        coreUsed: 65,
        memoryLimitMiB: 65536,
        memoryUsedMiB: 13312,
      },
      { scope: 'team', name: 'vision', coreLimit: 400, coreUsed: 65, memoryLimitMiB: 131072, memoryUsedMiB: 13312 },
    ]);
  });

  it('reads GPU-hours held and used, and idle allocations, over the window', async () => {
    const r = await source().readReports({ from: new Date(NOW.getTime() - 24 * HOUR), to: NOW });
    const byNs = Object.fromEntries(r.gpuHours.map((g) => [`${g.cluster}/${g.namespace}`, g]));
    // train: 40 core for 4 h = 1.6 GPU-h held; 3 % SM for 20 min = 0.01 GPU-h used.
    expect(byNs['west/ml']).toEqual({
      cluster: 'west',
      namespace: 'ml',
      team: 'vision',
      allocatedGpuHours: 1.6,
      usedGpuHours: 0.01,
    });
    // serve: 100 core for 4 h.
    expect(byNs['east/web']).toMatchObject({ allocatedGpuHours: 4, usedGpuHours: 0 });
    expect(r.idle).toEqual([
      {
        cluster: 'west',
        namespace: 'ml',
        holder: 'pod',
        pod: 'train',
        node: 'node-a',
        cardUuid: 'GPU-a0',
        core: 30,
        memoryMiB: 8192,
        heldMs: 4 * HOUR,
        utilizationPct: 3,
      },
    ]);
  });

  it('lists as idle only allocations held for its configured span', async () => {
    const window = { from: new Date(NOW.getTime() - 24 * HOUR), to: NOW };
    // train is held 4 h: idle over 3 h, not yet over 5 h.
    expect((await source(180).readReports(window)).idle.map((i) => i.pod)).toEqual(['train']);
    expect((await source(300).readReports(window)).idle).toEqual([]);
  });

  it("marks a bursting pod from its containers' latest recent samples, not from old ones", async () => {
    const ledger = createLedger(t.db, { clock });
    const at = (container: string, podUid: string, agoMs: number, burstMiB: number, evictedMiB: number) => ({
      cluster: podUid === 'u1' ? 'west' : 'east',
      namespace: podUid === 'u1' ? 'ml' : 'web',
      podUid,
      container,
      cardUuid: podUid === 'u1' ? 'GPU-a0' : 'GPU-b0',
      sampledAt: new Date(NOW.getTime() - agoMs - 10_000),
      periodS: 10,
      smPct: 3,
      memoryUsedMiB: 100,
      memoryBurstMiB: burstMiB,
      memoryBurstEvictedMiB: evictedMiB,
      burstEvicted: evictedMiB > 0,
    });
    const recorded = await ledger.recordUsage([
      at('side', 'u1', 60_000, 4096, 0), // superseded by the next, which bursts less
      at('side', 'u1', 0, 512, 128),
      at('main', 'u2', BURST_FRESH_MS + 60_000, 2048, 0), // ended too long ago to say anything now
    ]);
    expect(recorded).toMatchObject({ recorded: 3 });
    const o = buildOverview({
      clusters: await source().readClusters(),
      quotas: [],
      reports: { gpuHours: [], idle: [] },
      refusals: [],
      window: { from: new Date(NOW.getTime() - HOUR), to: NOW },
      now: NOW,
    });
    expect(o.clusters[1]?.nodes[0]?.cards[0]?.pods).toEqual([
      {
        holder: 'pod',
        namespace: 'ml',
        pod: 'train',
        core: 40,
        memoryMiB: 9216,
        state: 'bound',
        burst: { mib: 512, evictedMiB: 128 },
      },
    ]);
    expect(o.clusters[0]?.nodes[0]?.cards[0]?.pods[0]).not.toHaveProperty('burst');
  });
});

describe('quotaFromReport', () => {
  it('splits a namespace quota’s subject into cluster and namespace, keeps a team’s whole', () => {
    const row = {
      scope: 'namespace',
      subject: 'west/ml',
      gpuModel: 'A100',
      coreLimit: 1,
      coreUsed: 0,
      memoryLimitMiB: 2,
      memoryUsedMiB: 0,
    };
    expect(quotaFromReport(row)).toMatchObject({ scope: 'namespace', name: 'ml', cluster: 'west', gpuModel: 'A100' });
    expect(quotaFromReport({ ...row, scope: 'team', subject: 'a/b', gpuModel: '' })).toEqual({
      scope: 'team',
      name: 'a/b',
      coreLimit: 1,
      coreUsed: 0,
      memoryLimitMiB: 2,
      memoryUsedMiB: 0,
    });
  });
});

describe('groupCapacity with the live node view', () => {
  const ledgerCard = {
    uuid: 'GPU-1',
    cluster: 'c',
    node: 'n1',
    index: 0,
    model: 'T4',
    memoryMiB: 15360,
    isPresent: true,
  };
  const live = [
    {
      cluster: 'c',
      node: 'n1',
      cards: [{ uuid: 'GPU-1', index: 0, model: 'T4', memoryMiB: 15360, healthy: false }],
    },
    {
      cluster: 'c',
      node: 'n0',
      cards: [
        { uuid: 'GPU-3', index: 1, model: 'T4', memoryMiB: 15360, healthy: true, memoryBurst: false },
        { uuid: 'GPU-2', index: 0, model: 'T4', memoryMiB: 15360, healthy: true, memoryBurst: true },
      ],
    },
  ];

  it('adds cards of nodes the ledger has not seen yet, in node and index order', () => {
    const clusters = groupCapacity([ledgerCard], [], live);
    expect(clusters.map((c) => c.nodes.map((n) => [n.name, n.cards.map((x) => x.uuid)]))).toEqual([
      [
        ['n0', ['GPU-2', 'GPU-3']],
        ['n1', ['GPU-1']],
      ],
    ]);
  });

  it('takes health from the live view', () => {
    const clusters = groupCapacity([ledgerCard], [], live);
    expect(clusters[0]?.nodes.find((n) => n.name === 'n1')?.cards[0]?.healthy).toBe(false);
    expect(groupCapacity([ledgerCard], [])[0]?.nodes[0]?.cards[0]?.healthy).toBeUndefined();
  });

  it('takes from the live view whether each card serves memory bursts, and says nothing when it does not know', () => {
    const clusters = groupCapacity([ledgerCard], [], live);
    const n0 = clusters[0]?.nodes.find((n) => n.name === 'n0')?.cards ?? [];
    expect(n0.map((c) => [c.uuid, c.memoryBurst])).toEqual([
      ['GPU-2', true],
      ['GPU-3', false],
    ]);
    expect(clusters[0]?.nodes.find((n) => n.name === 'n1')?.cards[0]).not.toHaveProperty('memoryBurst');
  });
});

describe('groupCapacity for a card in MIG mode', () => {
  const row = (uuid: string, index: number, model: string, memoryMiB: number) => ({
    uuid,
    cluster: 'c',
    node: 'n1',
    index,
    model,
    memoryMiB,
    isPresent: true,
  });
  const instance = (uuid: string, start: number) => ({
    uuid,
    index: 0,
    model: 'H100 MIG 3g.40gb',
    memoryMiB: 40448,
    healthy: true,
    mig: { parent: 'GPU-0', profile: '3g.40gb', start, size: 4 },
  });
  const live = [
    {
      cluster: 'c',
      node: 'n1',
      cards: [
        { uuid: 'GPU-0', index: 0, model: 'H100', memoryMiB: 81559, healthy: true, migMode: true },
        instance('MIG-b', 4),
        instance('MIG-a', 0),
        { uuid: 'GPU-1', index: 1, model: 'H100', memoryMiB: 81559, healthy: true },
      ],
    },
  ];

  it('draws it as its instances, by placement, each with its holders, the ledger rows of instances under it', () => {
    const held = {
      cluster: 'c',
      podUid: 'u1',
      namespace: 'ml',
      pod: 'train',
      container: 'main',
      cardUuid: 'MIG-b',
      core: 100,
      memoryMiB: 40448,
      state: 'bound',
      reservedAt: new Date('2026-01-01T00:00:00Z'),
    };
    const ledger = [
      row('GPU-0', 0, 'H100', 81559),
      row('MIG-b', 0, 'H100 MIG 3g.40gb', 40448),
      row('GPU-1', 1, 'H100', 81559),
    ];
    const [node] = groupCapacity(ledger, [held], live)[0]?.nodes ?? [];
    expect(
      node?.cards.map((c) => [c.uuid, c.instances?.map((i) => [i.uuid, i.mig?.start, i.allocations.length])]),
    ).toEqual([
      [
        'GPU-0',
        [
          ['MIG-a', 0, 0],
          ['MIG-b', 4, 1],
        ],
      ],
      ['GPU-1', undefined],
    ]);
  });
});
