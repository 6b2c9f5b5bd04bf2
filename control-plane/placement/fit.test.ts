import { describe, expect, it } from 'vitest';
import {
  assignedPod,
  buildNodeSnapshot,
  type CardSpec,
  type ContainerSpec,
  cardUuid,
  gpuNode,
  gpuPod,
  type NodeSpec,
  policy,
} from '../../test/support/control-plane/builders.js';
import type { PodWithStatus } from './cluster-snapshot.js';
import { type FitContext, fitPod } from './fit.js';
import { coreAmountsOf } from './holds/index.js';
import { readPlacementRequest } from './placement-request.js';

const NOW = Date.parse('2026-11-22T04:00:30Z');
const ctx: FitContext = { nowMs: NOW, heartbeatStaleMs: 60_000 };

function tryFit(
  nodeSpec: Partial<NodeSpec>,
  containers: ContainerSpec[],
  opts: { pods?: PodWithStatus[]; annotations?: Record<string, string> } = {},
) {
  const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards: 2, ...nodeSpec }), opts.pods ?? []);
  const req = readPlacementRequest(gpuPod('p', containers, { annotations: opts.annotations ?? {} }), policy, 'binpack');
  return fitPod(req, node, ctx);
}

const used = (cards: number[], core: number, memoryMiB: number, name = 'other') =>
  assignedPod(name, 'n1', [{ core, memoryMiB, cards }]);

describe('fitPod: capacity rules', () => {
  it.each([
    { name: 'share fits on an empty card', containers: [{ core: 30, memoryMiB: 2048 }], pods: [], ok: true },
    {
      name: 'share refused when no card has the memory',
      containers: [{ core: 30, memoryMiB: 2048 }],
      cards: [{ memoryMiB: 4096 }],
      pods: [used([0], 10, 3072)],
      reason: 'insufficient-memory',
      message: 'no card with 2048 MiB free; best has 1024 MiB',
    },
    {
      name: 'share refused when no card has the core',
      containers: [{ core: 30, memoryMiB: 100 }],
      cards: [{}],
      pods: [used([0], 80, 100)],
      reason: 'insufficient-core',
      message: 'no card with 30 core free; best has 20',
    },
    {
      name: 'share needs core and memory on ONE card',
      containers: [{ core: 50, memoryMiB: 3000 }],
      cards: [{ memoryMiB: 4096 }, { memoryMiB: 4096 }],
      pods: [used([0], 10, 2000, 'a'), used([1], 60, 0 + 1, 'b')],
      reason: 'insufficient-capacity',
      message: 'no card with both 50 core and 3000 MiB free; cards with 50 core free have at most 2096 MiB free',
    },
    { name: 'two whole cards on two free cards', containers: [{ core: 200 }], pods: [], ok: true },
    {
      name: 'whole cards need entirely free cards',
      containers: [{ core: 200 }],
      pods: [used([1], 1, 1)],
      reason: 'insufficient-cards',
      message: 'needs 2 entirely free cards; 1 free',
    },
    {
      name: 'whole card with more memory than any card',
      containers: [{ core: 100, memoryMiB: 90000 }],
      pods: [],
      reason: 'insufficient-memory',
      message: 'asks 90000 MiB per card; the largest card here has 81920 MiB',
    },
    {
      name: 'each container is counted: two 60% shares need two cards',
      containers: [
        { name: 'a', core: 60, memoryMiB: 10 },
        { name: 'b', core: 60, memoryMiB: 10 },
        { name: 'c', core: 60, memoryMiB: 10 },
      ],
      pods: [],
      reason: 'insufficient-core',
      message: 'container c: no card with 60 core free; best has 40',
    },
    {
      name: 'init container reuses the app containers’ share (max, not sum)',
      containers: [
        { name: 'init', core: 90, memoryMiB: 1000, init: true },
        { name: 'app', core: 50, memoryMiB: 500 },
      ],
      cards: [{}],
      pods: [],
      ok: true,
    },
    {
      name: 'init container larger than what is free is refused',
      containers: [
        { name: 'init', core: 90, memoryMiB: 1000, init: true },
        { name: 'app', core: 50, memoryMiB: 500 },
      ],
      cards: [{}],
      pods: [used([0], 30, 100)],
      reason: 'insufficient-core',
      message: 'init container init: no card with 90 core free; best has 70',
    },
  ] as {
    name: string;
    containers: ContainerSpec[];
    cards?: CardSpec[];
    pods: PodWithStatus[];
    ok?: boolean;
    reason?: string;
    message?: string;
  }[])('$name', ({ containers, cards, pods, ok, reason, message }) => {
    const r = tryFit(cards ? { cards } : {}, containers, { pods });
    if (ok) {
      expect(r.ok).toBe(true);
    } else {
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.refusal).toEqual({ reason, message });
    }
  });

  it('counts an init container as Kubernetes does: the card holds max(init, sum of app)', () => {
    const r = tryFit({ cards: [{}] }, [
      { name: 'init', core: 90, memoryMiB: 1000, init: true },
      { name: 'a', core: 30, memoryMiB: 500 },
      { name: 'b', core: 20, memoryMiB: 700 },
    ]);
    expect(r.ok && [...r.placement.cardUse.values()]).toEqual([{ core: 90, memoryMiB: 1200 }]);
  });

  it('a whole-card pod reserves the whole card but is granted the memory it asked', () => {
    const r = tryFit({}, [{ core: 100, memoryMiB: 1000 }]);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.placement.containers[0]?.cards).toEqual([{ uuid: cardUuid('n1', 0), core: 100, memoryMiB: 1000 }]);
    expect([...r.placement.cardUse.values()]).toEqual([{ core: 100, memoryMiB: 81920 }]);
  });

  it('finished pods give their cards back', () => {
    const done = assignedPod('done', 'n1', [{ core: 100, memoryMiB: 81920, cards: [0, 1] }], { phase: 'Succeeded' });
    expect(tryFit({}, [{ core: 200 }], { pods: [done] }).ok).toBe(true);
  });
});

describe('fitPod: card filters', () => {
  const mixed: CardSpec[] = [{ model: 'NVIDIA L4', memoryMiB: 23034 }, { model: 'NVIDIA A100-SXM4-80GB' }];
  it.each([
    { name: 'model include picks the A100', ann: { 'nvidia.com/vcuda-gpu-model-include': 'a100' }, card: 1 },
    { name: 'model exclude avoids the A100', ann: { 'nvidia.com/vcuda-gpu-model-exclude': 'A100' }, card: 0 },
    { name: 'uuid include pins the card', ann: { 'nvidia.com/vcuda-gpu-uuid-include': cardUuid('n1', 1) }, card: 1 },
    { name: 'uuid exclude avoids the card', ann: { 'nvidia.com/vcuda-gpu-uuid-exclude': cardUuid('n1', 1) }, card: 0 },
  ] as { name: string; ann: Record<string, string>; card: number }[])('$name', ({ ann, card }) => {
    const r = tryFit({ cards: mixed }, [{ core: 10, memoryMiB: 10 }], { annotations: ann });
    expect(r.ok && r.placement.containers[0]?.cards[0]?.uuid).toBe(cardUuid('n1', card));
  });

  it.each([
    {
      name: 'model include matching nothing',
      ann: { 'nvidia.com/vcuda-gpu-model-include': 'h100' },
      message: "no healthy card's model matches h100 (node has NVIDIA L4, NVIDIA A100-SXM4-80GB)",
    },
    {
      name: 'model exclude covering everything',
      ann: { 'nvidia.com/vcuda-gpu-model-exclude': 'nvidia' },
      message: "every healthy card's model is excluded by nvidia (node has NVIDIA L4, NVIDIA A100-SXM4-80GB)",
    },
    {
      name: 'uuid include of a card elsewhere',
      ann: { 'nvidia.com/vcuda-gpu-uuid-include': 'GPU-ffff' },
      message: 'none of the required cards GPU-ffff is a healthy card here',
    },
  ] as { name: string; ann: Record<string, string>; message: string }[])('refuses: $name', ({ ann, message }) => {
    const r = tryFit({ cards: mixed }, [{ core: 10, memoryMiB: 10 }], { annotations: ann });
    expect(!r.ok && r.refusal).toEqual({ reason: 'no-matching-card', message });
  });

  it('skips unhealthy cards and explains when all are', () => {
    const one = tryFit({ cards: [{ healthy: false, healthReason: 'Xid 79' }, {}] }, [{ core: 10, memoryMiB: 10 }]);
    expect(one.ok && one.placement.containers[0]?.cards[0]?.uuid).toBe(cardUuid('n1', 1));
    const none = tryFit({ cards: [{ healthy: false, healthReason: 'Xid 79' }] }, [{ core: 10, memoryMiB: 10 }]);
    expect(!none.ok && none.refusal).toEqual({
      reason: 'no-matching-card',
      message: 'all 1 cards are unhealthy (Xid 79)',
    });
  });
});

describe('fitPod: cards in MIG mode', () => {
  const mig = (mode: 'enabled' | 'disabled') => ({ mode, profiles: [], instances: [] });

  it('never offers a card in MIG mode whole or as a share of the full card', () => {
    const share = tryFit({ cards: [{ mig: mig('enabled') }, {}] }, [{ core: 10, memoryMiB: 10 }]);
    expect(share.ok && share.placement.containers[0]?.cards[0]?.uuid).toBe(cardUuid('n1', 1));
    for (const containers of [[{ core: 10, memoryMiB: 10 }], [{ core: 100 }]]) {
      const none = tryFit({ cards: [{ mig: mig('enabled') }] }, containers);
      expect(!none.ok && none.refusal).toEqual({
        reason: 'no-matching-card',
        message: 'all 1 cards are unhealthy (in MIG mode: served only as MIG instances)',
      });
    }
  });

  it('offers a MIG-capable card out of MIG mode like any other', () => {
    const r = tryFit({ cards: [{ mig: mig('disabled') }] }, [{ core: 100 }]);
    expect(r.ok).toBe(true);
  });
});

describe('fitPod: node state', () => {
  it('refuses a node whose heartbeat is stale', () => {
    const r = tryFit({ heartbeat: new Date(NOW - 95_000) }, [{ core: 10, memoryMiB: 10 }]);
    expect(!r.ok && r.refusal).toEqual({
      reason: 'stale-heartbeat',
      message: 'node agent heartbeat is 95 s old (limit 60 s)',
    });
  });

  it('refuses a node without inventory or with a malformed one', () => {
    const req = readPlacementRequest(gpuPod('p', [{ core: 10, memoryMiB: 10 }]), policy, 'binpack');
    const bare = buildNodeSnapshot({ metadata: { name: 'n0', annotations: {} } }, []);
    expect(fitPod(req, bare, ctx)).toMatchObject({ ok: false, refusal: { reason: 'no-inventory' } });
    const bad = buildNodeSnapshot(
      { metadata: { name: 'n0', annotations: { 'vcuda.io/inventory': '{"version":2}' } } },
      [],
    );
    expect(fitPod(req, bad, ctx)).toMatchObject({ ok: false, refusal: { reason: 'no-inventory' } });
    expect(fitPod(req, undefined, ctx)).toMatchObject({ ok: false, refusal: { reason: 'unknown-node' } });
  });
});

describe('fitPod: memory unit', () => {
  it('refuses a node whose agent counts memory in another unit, and accepts a matching one', () => {
    const req = readPlacementRequest(gpuPod('p', [{ core: 10, memoryMiB: 10 }]), policy, 'binpack');
    const node256 = buildNodeSnapshot(gpuNode({ name: 'n1', cards: 1, memoryUnitMiB: 256 }), []);
    const r = fitPod(req, node256, { ...ctx, memoryUnitMiB: 1 });
    expect(!r.ok && r.refusal).toEqual({
      reason: 'memory-unit-mismatch',
      message:
        'node agent counts vcuda-memory in 256 MiB units, the control plane in 1 MiB; set the same memoryUnitMiB on both',
    });
    expect(fitPod(req, node256, { ...ctx, memoryUnitMiB: 256 }).ok).toBe(true);
  });
});

describe('fitPod: no allocation tie', () => {
  type Grant = { core: number; init?: boolean; cards?: number[] };
  const pendingPod = (grants: Grant[], assignedAt = new Date(NOW - 5_000)) =>
    assignedPod(
      'starting',
      'n1',
      grants.map((g, i) => ({ core: g.core, memoryMiB: 10, cards: g.cards ?? [i % 4], init: g.init ?? false })),
      { allocated: false, assignedAt },
    );
  const fitBeside = (pods: PodWithStatus[], containers: ContainerSpec[]) => {
    const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards: 4 }), pods);
    return fitPod(readPlacementRequest(gpuPod('p', containers), policy, 'binpack'), node, ctx);
  };
  const share = (core: number, init = false): ContainerSpec => ({ core, memoryMiB: 10, init });

  // The node agent ties containers by device IDs at PreStartContainer: a pod still starting on the
  // node never blocks another of the same container sizes.
  it.each([
    { name: 'same single container', pending: [{ core: 30 }], asks: [share(30)] },
    { name: 'pending [30, 50], new [30]', pending: [{ core: 30 }, { core: 50 }], asks: [share(30)] },
    { name: 'pending init 40, new app 40', pending: [{ core: 40, init: true }, { core: 20 }], asks: [share(40)] },
    { name: 'whole cards: pending 200, new 200', pending: [{ core: 100, cards: [0, 1] }], asks: [{ core: 200 }] },
  ])('accepts a pod sharing a size with one still starting: $name', ({ pending, asks }) => {
    expect(fitBeside([pendingPod(pending)], asks).ok).toBe(true);
  });

  it.each([
    { name: 'a different size', pods: () => [pendingPod([{ core: 20 }])], asks: [share(30)] },
    {
      name: 'disjoint multi-container sizes',
      pods: () => [pendingPod([{ core: 20 }, { core: 50 }])],
      asks: [share(30), share(60)],
    },
    {
      name: 'disjoint with init containers',
      pods: () => [pendingPod([{ core: 20, init: true }, { core: 50 }])],
      asks: [share(30, true), share(40)],
    },
    { name: '100 pending beside 200 asked', pods: () => [pendingPod([{ core: 100 }])], asks: [{ core: 200 }] },
    {
      name: 'an allocated pod of the same size',
      pods: () => [assignedPod('running', 'n1', [{ core: 30, memoryMiB: 10, cards: [0] }])],
      asks: [share(30)],
    },
    {
      name: 'a pending one older than the TTL',
      pods: () => [pendingPod([{ core: 30 }], new Date(NOW - 400_000))],
      asks: [share(30)],
    },
    { name: 'its own repeated sizes', pods: () => [], asks: [share(30), share(30)] },
  ])('accepts beside $name', ({ pods, asks }) => {
    expect(fitBeside(pods(), asks).ok).toBe(true);
  });
});

describe('coreAmountsOf', () => {
  it('keeps distinct amounts, ascending', () => {
    expect(coreAmountsOf([50, 30, 50, 200])).toEqual([30, 50, 200]);
  });
});

describe('fitPod: NUMA', () => {
  const twoSockets: CardSpec[] = [{ numaNode: 0 }, { numaNode: 0 }, { numaNode: 1 }, { numaNode: 1 }];
  it('keeps every card of the pod on one NUMA node when asked', () => {
    const pods = [used([0], 10, 10, 'a'), used([2], 10, 10, 'b')];
    const ok = tryFit(
      { cards: twoSockets },
      [
        { name: 'x', core: 100 },
        { name: 'y', core: 50, memoryMiB: 10 },
      ],
      {
        pods,
        annotations: { 'nvidia.com/vcuda-single-numa': 'true' },
      },
    );
    expect(ok.ok).toBe(true);
    if (!ok.ok) return;
    const uuids = ok.placement.containers.flatMap((c) => c.cards.map((g) => g.uuid));
    const numa = new Set(
      uuids.map((u) => twoSockets[[0, 1, 2, 3].find((i) => cardUuid('n1', i) === u) as number]?.numaNode),
    );
    expect(numa.size).toBe(1);
  });

  it('refuses when only a split across NUMA nodes would fit', () => {
    const pods = [used([0], 10, 10, 'a'), used([2], 10, 10, 'b')];
    const r = tryFit({ cards: twoSockets }, [{ core: 200 }], {
      pods,
      annotations: { 'nvidia.com/vcuda-single-numa': 'true' },
    });
    expect(!r.ok && r.refusal.reason).toBe('single-numa');
    expect(!r.ok && r.refusal.message).toBe(
      'no single NUMA node can hold the pod (NUMA 0: needs 2 entirely free cards; 1 free; NUMA 1: needs 2 entirely free cards; 1 free)',
    );
    expect(tryFit({ cards: twoSockets }, [{ core: 200 }], { pods }).ok).toBe(true);
  });
});

describe('fitPod: reuse across pods of one workload', () => {
  it('reuses the choice on an unchanged node snapshot and recomputes once the node changes', () => {
    const first = readPlacementRequest(gpuPod('a', [{ core: 60, memoryMiB: 10 }], { uid: 'ua' }), policy, 'binpack');
    const second = readPlacementRequest(gpuPod('b', [{ core: 60, memoryMiB: 10 }], { uid: 'ub' }), policy, 'binpack');
    const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards: 1 }), []);
    const r1 = fitPod(first, node, ctx);
    expect(fitPod(second, node, ctx)).toBe(r1);
    const after = buildNodeSnapshot(gpuNode({ name: 'n1', cards: 1 }), [
      assignedPod('a', 'n1', [{ core: 60, memoryMiB: 10, cards: [0] }]),
    ]);
    expect(fitPod(second, after, ctx)).toMatchObject({ ok: false, refusal: { reason: 'insufficient-core' } });
  });

  it('reuses the choice beside a pending pod of the same size', () => {
    const pending = assignedPod('a', 'n1', [{ core: 30, memoryMiB: 10, cards: [0] }], {
      allocated: false,
      assignedAt: new Date(NOW - 1000),
    });
    const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards: 2 }), [pending]);
    const own = readPlacementRequest(gpuPod('a', [{ core: 30, memoryMiB: 10 }], { uid: 'uid-a' }), policy, 'binpack');
    const other = readPlacementRequest(gpuPod('b', [{ core: 30, memoryMiB: 10 }], { uid: 'uid-b' }), policy, 'binpack');
    expect(fitPod(own, node, ctx).ok).toBe(true);
    expect(fitPod(other, node, ctx).ok).toBe(true);
  });
});
