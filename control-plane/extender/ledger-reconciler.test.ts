import { and, eq, ne } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { allocations, podHolds } from '../../db/schema.js';
import { assignedPod, forgedPlainPod, gpuNode, gpuPod, testState } from '../../test/support/control-plane/builders.js';
import type { ClusterState } from '../cluster-state.js';
import { LedgerNodes } from './ledger-nodes.js';
import { podsToRestore, reconcileLedger } from './ledger-reconciler.js';

const NOW = new Date('2026-11-22T04:10:00Z');
const GRACE_MS = 30_000;

describe('podsToRestore', () => {
  const state = testState();
  state.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
  const old = new Date(NOW.getTime() - 5 * 60_000);
  const young = new Date(NOW.getTime() - 5_000);
  const pods = [
    assignedPod(
      'running',
      'n1',
      [
        { core: 30, memoryMiB: 1024, cards: [0] },
        { core: 20, memoryMiB: 512, cards: [0] },
      ],
      {
        assignedAt: old,
      },
    ),
    assignedPod('binding', 'n1', [{ core: 30, memoryMiB: 1024, cards: [1] }], { assignedAt: young }),
    assignedPod('finished', 'n1', [{ core: 30, memoryMiB: 1024, cards: [1] }], { assignedAt: old, phase: 'Succeeded' }),
    gpuPod('pending', [{ core: 30, memoryMiB: 1024 }]),
  ];
  for (const p of pods) state.upsertPod(p);
  const missing = pods.map((p) => ({ uid: p.metadata?.uid ?? '', namespace: 'default', name: p.metadata?.name ?? '' }));

  const podOf = (ns: string, n: string) => state.pod(ns, n);
  const verifiedOf = (ns: string, n: string) => state.heldAssignment(ns, n);

  it('puts back only running pods bound to their assignment and assigned before the grace', async () => {
    await state.settled();
    const plans = podsToRestore(missing, podOf, verifiedOf, NOW.getTime(), GRACE_MS);
    expect(plans.map((p) => p.pod)).toEqual(['running']);
    // Both containers share card 0: one row carrying the pod's whole hold there.
    expect(plans[0]?.items).toEqual([{ container: 'c0,c1', cardUuid: expect.any(String), core: 50, memoryMiB: 1536 }]);
  });

  it('never restores a pod recreated under the same name', async () => {
    await state.settled();
    const stale = [{ ...missing[0]!, uid: 'uid-of-an-earlier-pod' }];
    expect(podsToRestore(stale, podOf, verifiedOf, NOW.getTime(), GRACE_MS)).toEqual([]);
  });
});

describe('reconcileLedger against a real ledger', () => {
  let db: VcudaDb;
  let ledger: Ledger;
  beforeAll(async () => {
    db = await connectDb({});
    await migrate(db);
    ledger = createLedger(db, { clock: () => NOW });
  });
  afterAll(async () => closeDb(db));
  afterEach(async () => {
    const held = await db
      .selectDistinct({ uid: allocations.podUid })
      .from(allocations)
      .where(ne(allocations.state, 'released'));
    for (const h of held) await ledger.release('test', h.uid);
  });

  const live = (uid: string) =>
    db
      .select({ state: allocations.state, core: allocations.core })
      .from(allocations)
      .where(and(eq(allocations.podUid, uid), ne(allocations.state, 'released')));

  const reconcilerFor = (state: ClusterState) => {
    const nodes = new LedgerNodes(ledger, 'test');
    return () =>
      reconcileLedger({
        cluster: 'test',
        ledger,
        state,
        ensureNode: (n) => nodes.ensure(n),
        clock: () => NOW,
        graceMs: GRACE_MS,
      });
  };

  it('restores a running pod the ledger lost, bound, and releases what no pod holds', async () => {
    const state = testState();
    state.upsertNode(gpuNode({ name: 'n1', cards: 2 }));
    const pod = assignedPod('lost', 'n1', [{ core: 40, memoryMiB: 2048, cards: [0] }], {
      assignedAt: new Date(NOW.getTime() - 120_000),
    });
    state.upsertPod(pod);
    await state.settled();
    const tick = reconcilerFor(state);
    // A pod that is gone, reserved long ago (before the pod list) on the other card.
    await new LedgerNodes(ledger, 'test').ensure(state.snapshot().nodes.get('n1')!);
    const ghostLedger = createLedger(db, { clock: () => new Date(NOW.getTime() - 120_000) });
    await ghostLedger.reserve({
      cluster: 'test',
      podUid: 'uid-ghost',
      namespace: 'default',
      pod: 'ghost',
      node: 'n1',
      items: [{ container: 'c0', cardUuid: state.snapshot().nodes.get('n1')!.cards[1]!.uuid, core: 10, memoryMiB: 10 }],
    });

    const first = await tick();
    expect(first).toEqual({ released: ['uid-ghost'], restored: ['default/lost'], refused: [] });
    expect(await live('uid-lost')).toEqual([{ state: 'bound', core: 40 }]);
    // Once held, nothing more to do.
    expect(await tick()).toEqual({ released: [], restored: [], refused: [] });
  });

  it('marks pods the node agent allocated in the ledger', async () => {
    const state = testState();
    state.upsertNode(gpuNode({ name: 'n3', cards: 2 }));
    const cards = state.snapshot().nodes.get('n3')!.cards;
    await new LedgerNodes(ledger, 'test').ensure(state.snapshot().nodes.get('n3')!);
    // Bound by a replica that went away before its watch saw the allocation.
    const first = assignedPod('first', 'n3', [{ core: 30, memoryMiB: 10, cards: [0] }], { allocated: true });
    await ledger.reserve({
      cluster: 'test',
      podUid: 'uid-first',
      namespace: 'default',
      pod: 'uid-first',
      node: 'n3',
      items: [{ container: 'c0', cardUuid: cards[0]!.uuid, core: 30, memoryMiB: 10 }],
    });
    await ledger.confirmMany('test', ['uid-first']);
    state.upsertPod(first);
    const allocatedAt = async () =>
      (await db.select().from(podHolds).where(eq(podHolds.podUid, 'uid-first')))[0]?.allocatedAt ?? null;
    expect(await allocatedAt()).toBeNull();
    await reconcilerFor(state)();
    expect(await allocatedAt()).toEqual(NOW);
  });

  it('reports a running pod whose card was given away meanwhile, and leaves the holder alone', async () => {
    const state = testState();
    state.upsertNode(gpuNode({ name: 'n2', cards: 1 }));
    const card = state.snapshot().nodes.get('n2')!.cards[0]!.uuid;
    await new LedgerNodes(ledger, 'test').ensure(state.snapshot().nodes.get('n2')!);
    const holder = assignedPod('holder', 'n2', [{ core: 80, memoryMiB: 1024, cards: [0] }]);
    state.upsertPod(holder);
    await ledger.reserve({
      cluster: 'test',
      podUid: 'uid-holder',
      namespace: 'default',
      pod: 'holder',
      node: 'n2',
      items: [{ container: 'c0', cardUuid: card, core: 80, memoryMiB: 1024 }],
    });
    state.upsertPod(
      assignedPod('lost-too', 'n2', [{ core: 40, memoryMiB: 1024, cards: [0] }], {
        assignedAt: new Date(NOW.getTime() - 120_000),
      }),
    );
    await state.settled();
    const r = await reconcilerFor(state)();
    expect(r.restored).toEqual([]);
    expect(r.refused).toEqual([
      { pod: 'default/lost-too', message: expect.stringMatching(/has 20 core free, pod asks 40/) },
    ]);
    expect(await live('uid-holder')).toHaveLength(1);
    expect(await live('uid-lost-too')).toEqual([]);
  });

  it('never reserves what a forged assignment names: a plain pod on every card of a node stays out of the ledger', async () => {
    const state = testState();
    state.upsertNode(gpuNode({ name: 'n8', cards: 8 }));
    state.upsertPod(forgedPlainPod('n8', { assignedAt: new Date(NOW.getTime() - 120_000) }));
    await state.settled();
    const r = await reconcilerFor(state)();
    expect(r).toEqual({ released: [], restored: [], refused: [] });
    expect(await live('uid-forger')).toEqual([]);
  });
});
