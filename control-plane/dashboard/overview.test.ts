import { describe, expect, it } from 'vitest';
import { claimHolderId } from '../../contract/index.js';
import { buildOverview, viewCard, viewNode, viewQuota } from './overview.js';
import type { CardAllocation, CardState } from './source.js';

const since = '2026-01-01T00:00:00.000Z';

function alloc(pod: string, core: number, memoryMiB: number, extra: Partial<CardAllocation> = {}): CardAllocation {
  return {
    cluster: 'c1',
    namespace: 'ml',
    pod,
    podUid: `uid-${pod}`,
    container: 'main',
    core,
    memoryMiB,
    state: 'bound',
    since,
    ...extra,
  };
}

function card(index: number, allocations: CardAllocation[], memoryMiB = 16384): CardState {
  return { uuid: `GPU-${index}000`, index, model: 'Tesla T4', memoryMiB, allocations };
}

describe('viewCard', () => {
  it('sums core and memory and groups a pod’s containers into one row', () => {
    const v = viewCard(
      card(0, [
        alloc('a', 30, 4096),
        alloc('a', 10, 1024, { container: 'side' }),
        alloc('b', 50, 8192, { state: 'reserved' }),
      ]),
    );
    expect(v).toMatchObject({
      coreUsed: 90,
      memoryUsedMiB: 13312,
      corePct: 90,
      memoryPct: 81.3,
      isOvercommitted: false,
    });
    expect(v.pods).toEqual([
      { holder: 'pod', namespace: 'ml', pod: 'b', core: 50, memoryMiB: 8192, state: 'reserved' },
      { holder: 'pod', namespace: 'ml', pod: 'a', core: 40, memoryMiB: 5120, state: 'bound' },
    ]);
  });

  it('lists a DRA claim’s shares as one claim row beside a pod of the same name', () => {
    const claimUid = claimHolderId('0f1e-claim');
    const v = viewCard(
      card(0, [
        alloc('train', 20, 2048, { podUid: claimUid, container: 'gpu/share-a' }),
        alloc('train', 10, 1024, { podUid: claimUid, container: 'gpu/share-b' }),
        alloc('train', 25, 4096),
      ]),
    );
    expect(v.coreUsed).toBe(55);
    expect(v.pods).toEqual([
      { holder: 'claim', namespace: 'ml', pod: 'train', core: 30, memoryMiB: 3072, state: 'bound' },
      { holder: 'pod', namespace: 'ml', pod: 'train', core: 25, memoryMiB: 4096, state: 'bound' },
    ]);
  });

  it.each([
    ['core', [alloc('a', 60, 10), alloc('b', 50, 10)]],
    ['memory', [alloc('a', 10, 16000), alloc('b', 10, 1000)]],
  ])('flags a card overcommitted on %s', (_what, allocations) => {
    expect(viewCard(card(0, allocations)).isOvercommitted).toBe(true);
  });

  it('reports health as unknown when the source does not know it', () => {
    expect(viewCard(card(0, [])).healthy).toBeNull();
    expect(viewCard({ ...card(0, []), healthy: false }).healthy).toBe(false);
  });

  it('says whether the card serves memory bursts, null when its node does not say', () => {
    expect(viewCard(card(0, [])).memoryBurst).toBeNull();
    expect(viewCard({ ...card(0, []), memoryBurst: false }).memoryBurst).toBe(false);
    expect(viewCard({ ...card(0, []), memoryBurst: true }).memoryBurst).toBe(true);
  });
});

describe('viewCard of a card in MIG mode', () => {
  const instance = (uuid: string, profile: string, start: number, size: number, allocations: CardAllocation[]) => ({
    uuid,
    index: 0,
    model: `H100 MIG ${profile}`,
    memoryMiB: 40448,
    allocations,
    mig: { parent: 'GPU-0', profile, start, size },
  });

  it('draws its instances with their holders, and counts a held one as the part of the card it spans', () => {
    const v = viewCard({
      uuid: 'GPU-0',
      index: 0,
      model: 'H100',
      memoryMiB: 81559,
      allocations: [],
      instances: [
        instance('MIG-a', '3g.40gb', 0, 4, [alloc('train', 100, 40448)]),
        instance('MIG-b', '3g.40gb', 4, 4, []),
      ],
    });
    expect(v).toMatchObject({ coreUsed: 50, memoryUsedMiB: 40448, isOvercommitted: false, pods: [] });
    expect(v.instances?.map((i) => [i.uuid, i.start, i.size, i.pods.map((p) => p.pod)])).toEqual([
      ['MIG-a', 0, 4, ['train']],
      ['MIG-b', 4, 4, []],
    ]);
    // It is never a free card, and offers no core to shares.
    const node = viewNode({ name: 'n', cards: [{ ...card(0, []), instances: [] }, card(1, [])] });
    expect(node.totals.freeCards).toBe(1);
    expect(node.freeCore).toBe(100);
  });

  it('counts a shared instance as part of its card: its shares in proportion to the part it spans', () => {
    const shared = (allocations: CardAllocation[]) => ({
      ...instance('MIG-s', '3g.40gb', 4, 4, allocations),
      mig: { parent: 'GPU-0', profile: '3g.40gb', start: 4, size: 4, isShared: true },
    });
    const mig = (allocations: CardAllocation[]) => ({
      ...{ uuid: 'GPU-0', index: 0, model: 'H100', memoryMiB: 81559, allocations: [] },
      instances: [instance('MIG-a', '3g.40gb', 0, 4, []), shared(allocations)],
    });
    const v = viewCard(mig([alloc('a', 30, 4096), alloc('b', 20, 4096)]));
    // Half the instance's core on half the card: a quarter of it.
    expect(v).toMatchObject({ coreUsed: 25, memoryUsedMiB: 8192, isOvercommitted: false });
    expect(v.instances?.[1]).toMatchObject({
      isShared: true,
      coreUsed: 50,
      memoryUsedMiB: 8192,
      isOvercommitted: false,
    });
    expect(v.instances?.[1]?.pods.map((p) => p.pod)).toEqual(['a', 'b']);
    expect(viewCard(mig([alloc('a', 60, 4096), alloc('b', 50, 4096)])).isOvercommitted).toBe(true);
    expect(viewCard(mig([alloc('a', 10, 40000), alloc('b', 10, 4096)])).isOvercommitted).toBe(true);
    // One card of the node, its capacity once.
    const node = viewNode({ name: 'n', cards: [mig([alloc('a', 100, 40448)])] });
    expect(node.totals).toMatchObject({ cards: 1, coreUsed: 50, coreCapacity: 100, memoryCapacityMiB: 81559 });
  });
});

describe('viewNode fragmentation', () => {
  it('is 0 when all free compute is on one card', () => {
    const n = viewNode({ name: 'n', cards: [card(0, [alloc('a', 100, 100)]), card(1, [])] });
    expect(n).toMatchObject({ freeCore: 100, largestFreeCore: 100, fragmentationPct: 0, strandedCore: 0 });
    expect(n.totals).toMatchObject({ cards: 2, freeCards: 1, coreUsed: 100, coreCapacity: 200 });
  });

  it('grows when free compute is scattered in slivers', () => {
    const n = viewNode({
      name: 'n',
      cards: [card(0, [alloc('a', 70, 100)]), card(1, [alloc('b', 70, 100)]), card(2, [alloc('c', 60, 100)])],
    });
    // 30 + 30 + 40 free, all on partly used cards: no whole-card pod can use any of it.
    expect(n).toMatchObject({ freeCore: 100, largestFreeCore: 40, fragmentationPct: 100 });
  });

  it('is 0 on an idle node and small when one card of eight is partly used', () => {
    const idle = viewNode({ name: 'n', cards: [0, 1, 2, 3, 4, 5, 6, 7].map((i) => card(i, [])) });
    expect(idle.fragmentationPct).toBe(0);
    const onePartly = viewNode({
      name: 'n',
      cards: [card(0, [alloc('a', 40, 100)]), ...[1, 2, 3, 4, 5, 6, 7].map((i) => card(i, []))],
    });
    // 60 of 760 free hundredths sit on the partly used card.
    expect(onePartly.fragmentationPct).toBe(8);
  });

  it('counts free compute on a card with no memory left as stranded, not free', () => {
    const n = viewNode({ name: 'n', cards: [card(0, [alloc('a', 20, 16000)]), card(1, [alloc('b', 50, 0)])] });
    expect(n).toMatchObject({ freeCore: 50, largestFreeCore: 50, strandedCore: 80, fragmentationPct: 100 });
  });

  it('orders cards by index whatever the source order', () => {
    const n = viewNode({ name: 'n', cards: [card(2, []), card(0, []), card(1, [])] });
    expect(n.cards.map((c) => c.index)).toEqual([0, 1, 2]);
  });
});

describe('viewQuota', () => {
  it.each([
    [{ coreUsed: 100, coreLimit: 200, memoryUsedMiB: 0, memoryLimitMiB: 1000 }, 50, 0, false],
    [{ coreUsed: 200, coreLimit: 200, memoryUsedMiB: 0, memoryLimitMiB: 1000 }, 100, 0, true],
    [{ coreUsed: 10, coreLimit: 200, memoryUsedMiB: 1000, memoryLimitMiB: 1000 }, 5, 100, true],
    [{ coreUsed: 0, coreLimit: 0, memoryUsedMiB: 0, memoryLimitMiB: 0 }, 0, 0, false],
  ])('%o -> core %d %%, memory %d %%, at limit %s', (use, corePct, memoryPct, isAtLimit) => {
    expect(viewQuota({ scope: 'namespace', name: 'ml', cluster: 'c1', ...use })).toMatchObject({
      corePct,
      memoryPct,
      isAtLimit,
    });
  });
});

describe('buildOverview', () => {
  const now = new Date('2026-01-02T00:00:00.000Z');
  const window = { from: new Date('2026-01-01T00:00:00.000Z'), to: now };

  it('totals every cluster, ranks reports and puts the newest refusal first', () => {
    const o = buildOverview({
      now,
      window,
      clusters: [
        { name: 'west', nodes: [{ name: 'w1', cards: [card(0, [alloc('a', 30, 1024)])] }] },
        { name: 'east', nodes: [{ name: 'e1', cards: [card(0, []), card(1, [alloc('b', 100, 16384)])] }] },
      ],
      quotas: [
        { scope: 'team', name: 'vision', coreLimit: 400, coreUsed: 100, memoryLimitMiB: 1, memoryUsedMiB: 0 },
        {
          scope: 'namespace',
          name: 'ml',
          cluster: 'west',
          coreLimit: 100,
          coreUsed: 100,
          memoryLimitMiB: 1,
          memoryUsedMiB: 0,
        },
      ],
      reports: {
        gpuHours: [
          { cluster: 'west', namespace: 'ml', team: 'vision', allocatedGpuHours: 1.234, usedGpuHours: 0.5 },
          { cluster: 'east', namespace: 'ml', team: 'vision', allocatedGpuHours: 5, usedGpuHours: 1 },
          { cluster: 'east', namespace: 'web', allocatedGpuHours: 2, usedGpuHours: 0 },
          { cluster: 'east', namespace: 'idle', allocatedGpuHours: 0, usedGpuHours: 0 },
        ],
        idle: [
          {
            cluster: 'west',
            namespace: 'ml',
            pod: 'a',
            node: 'w1',
            cardUuid: 'GPU-0',
            core: 30,
            memoryMiB: 1024,
            heldMs: 10,
          },
          {
            cluster: 'east',
            namespace: 'ml',
            pod: 'b',
            node: 'e1',
            cardUuid: 'GPU-1',
            core: 100,
            memoryMiB: 1,
            heldMs: 99,
          },
        ],
      },
      refusals: [
        {
          at: '2026-01-01T10:00:00.000Z',
          stage: 'quota',
          namespace: 'ml',
          pod: 'old',
          reason: 'VcudaQuotaRefused',
          message: 'm',
        },
        {
          at: '2026-01-01T11:00:00.000Z',
          stage: 'admission',
          namespace: 'ml',
          pod: 'new',
          reason: 'VcudaAdmissionRefused',
          message: 'm',
        },
      ],
      preemptions: [
        {
          at: '2026-01-01T11:00:00.000Z',
          role: 'victim',
          namespace: 'ml',
          pod: 'low-6',
          reason: 'Preempted',
          message: 'Preempted by pod u1 on node e1',
        },
        {
          at: '2026-01-01T11:00:01.000Z',
          role: 'preemptor',
          namespace: 'ml',
          pod: 'urgent',
          reason: 'VcudaPreempting',
          message: 'preempting lower-priority pods on e1 for GPU-0: ml/low-6 (priority 0)',
        },
      ],
    });
    expect(o.clusters.map((c) => c.name)).toEqual(['east', 'west']);
    expect(o.totals).toEqual({
      cards: 3,
      freeCards: 1,
      coreUsed: 130,
      coreCapacity: 300,
      memoryUsedMiB: 17408,
      memoryCapacityMiB: 49152,
    });
    expect(o.quotas.map((q) => q.name)).toEqual(['ml', 'vision']);
    expect(o.reports.gpuHoursByNamespace).toEqual([
      { key: 'east/ml', allocatedGpuHours: 5, usedGpuHours: 1, efficiencyPct: 20 },
      { key: 'east/web', allocatedGpuHours: 2, usedGpuHours: 0, efficiencyPct: 0 },
      { key: 'west/ml', allocatedGpuHours: 1.23, usedGpuHours: 0.5, efficiencyPct: 40.5 },
      { key: 'east/idle', allocatedGpuHours: 0, usedGpuHours: 0, efficiencyPct: null },
    ]);
    expect(o.reports.gpuHoursByTeam).toEqual([
      { key: 'vision', allocatedGpuHours: 6.23, usedGpuHours: 1.5, efficiencyPct: 24.1 },
    ]);
    expect(o.reports.idle.map((i) => i.pod)).toEqual(['b', 'a']);
    expect(o.refusals.map((r) => r.pod)).toEqual(['new', 'old']);
    // Who took whose cards, and why: newest first, the messages as the Events say them.
    expect(o.preemptions.map((p) => [p.role, p.pod, p.message])).toEqual([
      ['preemptor', 'urgent', 'preempting lower-priority pods on e1 for GPU-0: ml/low-6 (priority 0)'],
      ['victim', 'low-6', 'Preempted by pod u1 on node e1'],
    ]);
    expect(o.window).toEqual({ from: '2026-01-01T00:00:00.000Z', to: '2026-01-02T00:00:00.000Z' });
  });

  it('keeps only the top N rows of each ranking', () => {
    const gpuHours = Array.from({ length: 30 }, (_, i) => ({
      cluster: 'c',
      namespace: `ns${i}`,
      allocatedGpuHours: i,
      usedGpuHours: 0,
    }));
    const o = buildOverview(
      { now, window, clusters: [], quotas: [], reports: { gpuHours, idle: [] }, refusals: [] },
      { strandedBelowMiB: 1024, topN: 3, maxIdleRows: 1000 },
    );
    expect(o.reports.gpuHoursByNamespace.map((r) => r.key)).toEqual(['c/ns29', 'c/ns28', 'c/ns27']);
  });

  it('sends every idle allocation up to maxIdleRows, not the top N, with the count and the criteria', () => {
    const idle = Array.from({ length: 30 }, (_, i) => ({
      cluster: 'c',
      namespace: 'ns',
      pod: `p${i}`,
      node: 'n',
      cardUuid: 'GPU-1',
      core: 10,
      memoryMiB: 1024,
      heldMs: i * 60_000,
    }));
    const reports = { gpuHours: [], idle, idleCriteria: { forMinutes: 2, belowPct: 5 } };
    const input = { now, window, clusters: [], quotas: [], reports, refusals: [] };
    const all = buildOverview(input, { strandedBelowMiB: 1024, topN: 3, maxIdleRows: 1000 });
    expect(all.reports.idle).toHaveLength(30);
    expect(all.reports.idle[0]?.pod).toBe('p29');
    expect(all.reports.idleTotal).toBe(30);
    expect(all.reports.idleCriteria).toEqual({ forMinutes: 2, belowPct: 5 });
    const capped = buildOverview(input, { strandedBelowMiB: 1024, topN: 3, maxIdleRows: 20 });
    expect(capped.reports.idle).toHaveLength(20);
    expect(capped.reports.idleTotal).toBe(30);
    expect(buildOverview({ ...input, cluster: 'c' }).reports.idleCriteria).toEqual({ forMinutes: 2, belowPct: 5 });
  });

  it('shows one cluster when asked, keeping team quotas and the list of every cluster', () => {
    const o = buildOverview({
      now,
      window,
      cluster: 'west',
      clusters: [
        { name: 'west', nodes: [{ name: 'w1', cards: [card(0, [alloc('a', 30, 1024, { cluster: 'west' })])] }] },
        { name: 'east', nodes: [{ name: 'e1', cards: [card(0, [alloc('b', 50, 1024, { cluster: 'east' })])] }] },
      ],
      quotas: [
        { scope: 'team', name: 'vision', coreLimit: 400, coreUsed: 80, memoryLimitMiB: 1, memoryUsedMiB: 0 },
        {
          scope: 'namespace',
          name: 'ml',
          cluster: 'west',
          coreLimit: 100,
          coreUsed: 30,
          memoryLimitMiB: 1,
          memoryUsedMiB: 0,
        },
        {
          scope: 'namespace',
          name: 'ml',
          cluster: 'east',
          coreLimit: 100,
          coreUsed: 50,
          memoryLimitMiB: 1,
          memoryUsedMiB: 0,
        },
      ],
      reports: {
        gpuHours: [
          { cluster: 'west', namespace: 'ml', allocatedGpuHours: 1, usedGpuHours: 0 },
          { cluster: 'east', namespace: 'ml', allocatedGpuHours: 2, usedGpuHours: 0 },
          { cluster: 'north', namespace: 'ml', allocatedGpuHours: 3, usedGpuHours: 0 },
        ],
        idle: [
          {
            cluster: 'east',
            namespace: 'ml',
            pod: 'b',
            node: 'e1',
            cardUuid: 'GPU-0',
            core: 50,
            memoryMiB: 1,
            heldMs: 1,
          },
        ],
      },
      refusals: [
        {
          at: '2026-01-01T10:00:00.000Z',
          stage: 'quota',
          cluster: 'east',
          namespace: 'ml',
          pod: 'x',
          reason: 'r',
          message: '',
        },
        {
          at: '2026-01-01T10:00:00.000Z',
          stage: 'quota',
          cluster: 'west',
          namespace: 'ml',
          pod: 'y',
          reason: 'r',
          message: '',
        },
      ],
      preemptions: [
        {
          at: '2026-01-01T10:00:00.000Z',
          role: 'victim',
          cluster: 'east',
          namespace: 'ml',
          pod: 'e',
          reason: 'Preempted',
          message: '',
        },
        {
          at: '2026-01-01T10:00:00.000Z',
          role: 'victim',
          cluster: 'west',
          namespace: 'ml',
          pod: 'w',
          reason: 'Preempted',
          message: '',
        },
      ],
      unplacedPods: [
        { cluster: 'west', namespace: 'ml', pod: 'z', node: 'w2', phase: 'Pending', reason: 'no-assignment' },
        { cluster: 'east', namespace: 'ml', pod: 'h', node: 'e1', phase: 'Failed', reason: 'refused-by-kubelet' },
        { cluster: 'west', namespace: 'ml', pod: 'a', node: 'w1', phase: 'Running', reason: 'assignment-not-verified' },
      ],
    });
    expect(o.cluster).toBe('west');
    // north only has history (a cluster retired since): still pickable.
    expect(o.clusterNames).toEqual(['east', 'north', 'west']);
    expect(o.clusters.map((c) => c.name)).toEqual(['west']);
    expect(o.totals.coreUsed).toBe(30);
    expect(o.quotas.map((q) => `${q.cluster ?? 'team'}/${q.name}`).sort()).toEqual(['team/vision', 'west/ml']);
    expect(o.reports.gpuHoursByNamespace.map((r) => r.key)).toEqual(['west/ml']);
    expect(o.reports.idle).toEqual([]);
    expect(o.refusals.map((r) => r.pod)).toEqual(['y']);
    expect(o.preemptions.map((p) => p.pod)).toEqual(['w']);
    // Only the chosen cluster's, by node.
    expect(o.unplacedPods.map((p) => `${p.node}:${p.pod}`)).toEqual(['w1:a', 'w2:z']);
  });
});
