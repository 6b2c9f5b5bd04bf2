import { describe, expect, it } from 'vitest';
import {
  ledgerUseOfGrant,
  migPlacementKey,
  migSliceCardUuid,
  migSliceCore,
  migSpanCore,
  mostComputeSideBySide,
} from '../../contract/index.js';
import {
  buildNodeSnapshot,
  type CardSpec,
  cardUuid,
  gpuNode,
  H100_MIG_PROFILES,
  h100DynamicMigCard,
  h100MigCard,
  type MigContainerSpec,
  migAssignedPod,
  migPod,
  migUuid,
  policy,
} from '../../test/support/control-plane/builders.js';
import type { PodWithStatus } from './cluster-snapshot.js';
import {
  type DynamicMigCardSnapshot,
  offeredProfiles,
  sliceLedgerCardsOf,
  withTakenSpans,
} from './dynamic-mig-cards.js';
import { type CardPlan, type FitContext, fitPod } from './fit.js';
import { readPlacementRequest } from './placement-request.js';

const NOW = Date.parse('2026-11-22T04:00:30Z');
const ctx: FitContext = { nowMs: NOW, heartbeatStaleMs: 60_000 };
const parent = cardUuid('n1', 0);

function place(
  containers: MigContainerSpec[],
  pods: PodWithStatus[] = [],
  cards: CardSpec[] = [h100DynamicMigCard(0)],
) {
  const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards }), pods);
  return fitPod(readPlacementRequest(migPod('p', containers), policy, 'binpack'), node, ctx);
}

function grantsOf(r: ReturnType<typeof place>): CardPlan[] {
  if (!r.ok) throw new Error(r.refusal.message);
  return r.placement.containers.flatMap((c) => c.cards);
}

/** A running pod holding the dynamic placements `plans` (as a bind signs them). */
function holding(name: string, plans: CardPlan[]): PodWithStatus {
  return migAssignedPod(
    name,
    'n1',
    plans.map((g) => ({ uuid: g.uuid, memoryMiB: g.memoryMiB, ...(g.mig as Required<NonNullable<CardPlan['mig']>>) })),
  );
}

function overlaps(a: CardPlan, b: CardPlan): boolean {
  const x = a.mig as NonNullable<CardPlan['mig']>;
  const y = b.mig as NonNullable<CardPlan['mig']>;
  return x.parent === y.parent && x.start < y.start + y.size && y.start < x.start + x.size;
}

describe('fitPod: dynamic MIG', () => {
  it('grants a placement by its key, held as the memory slices it covers', () => {
    const r = place([{ profile: '3g.40gb' }]);
    const [g] = grantsOf(r);
    const [card] = buildNodeSnapshot(gpuNode({ name: 'n1', cards: [h100DynamicMigCard(0)] }), []).dynamicMig;
    expect(g?.mig).toEqual({
      ...{ parent, profile: '3g.40gb', start: g?.mig?.start, size: 4, dynamic: true },
      sliceMemoryMiB: card?.sliceMemoryMiB,
    });
    expect([0, 4]).toContain(g?.mig?.start);
    expect(g?.uuid).toBe(migPlacementKey({ parent, profile: '3g.40gb', start: g?.mig?.start ?? -1 }));
    if (!r.ok) return;
    const start = g?.mig?.start ?? 0;
    expect([...r.placement.cardUse.keys()].sort()).toEqual(
      [0, 1, 2, 3].map((k) => migSliceCardUuid(parent, start + k)),
    );
    // Each slice charged all the memory its ledger card registers, so no second holder fits.
    const registered = sliceLedgerCardsOf(card as DynamicMigCardSnapshot).map((c) => c.memoryMiB);
    expect(new Set(registered)).toEqual(new Set([10195]));
    expect([...r.placement.cardUse.values()].every((u) => u.memoryMiB === 10195)).toBe(true);
    expect([...r.placement.cardUse.values()].reduce((s, u) => s + u.core, 0)).toBe(50);
  });

  it('gives pods placed one after another legal placements that never overlap, then refuses with the free slices', () => {
    const held: PodWithStatus[] = [];
    const all: CardPlan[] = [];
    for (const profile of ['4g.40gb', '2g.20gb', '1g.10gb']) {
      const plans = grantsOf(place([{ profile }], held));
      for (const g of plans) {
        const shape = H100_MIG_PROFILES.find((p) => p.profile === profile);
        expect(shape?.placements).toContain(g.mig?.start);
        for (const other of all) expect(overlaps(g, other)).toBe(false);
      }
      all.push(...plans);
      held.push(holding(`h${held.length}`, plans));
    }
    const computeUsed = all.reduce(
      (s, g) => s + (H100_MIG_PROFILES.find((p) => p.profile === g.mig?.profile)?.computeSlices ?? 0),
      0,
    );
    expect(computeUsed).toBe(7);
    const full = place([{ profile: '1g.10gb' }], held);
    expect(full.ok).toBe(false);
    if (!full.ok)
      expect(full.refusal.message).toMatch(
        /no free 1g\.10gb placement on a dynamic-MIG card \(card 0 free memory slices 7\)/,
      );
  });

  it('places a pod asking two instances on distinct placements, the first not stranding the second', () => {
    const plans = grantsOf(place([{ profile: '3g.40gb', count: 2 }]));
    expect(plans.map((g) => g.mig?.start).sort()).toEqual([0, 4]);
  });

  it('never offers an instance on a dynamic card as a free static one: it counts as taken', () => {
    // A 3g.40gb exists at 0 (made for another pod, or by hand): the pod gets a new one at 4.
    const [g] = grantsOf(place([{ profile: '3g.40gb' }], [], [h100DynamicMigCard(0, [['3g.40gb', 0]])]));
    expect(g?.uuid).toBe(migPlacementKey({ parent, profile: '3g.40gb', start: 4 }));
    expect(g?.uuid).not.toBe(migUuid(0, 0));
  });

  it('takes a free static instance before cutting a dynamic card', () => {
    const cards = [h100MigCard(0, [['3g.40gb', 0]]), h100DynamicMigCard(1)];
    const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards }), []);
    const r = fitPod(
      readPlacementRequest(migPod('p', [{ profile: '3g.40gb', count: 1 }]), policy, 'binpack'),
      node,
      ctx,
    );
    expect(r.ok && r.placement.containers[0]?.cards[0]?.uuid).toBe(migUuid(0, 0));
  });

  it('counts a held placement once, whether its instance exists yet or not', () => {
    const key = { parent, profile: '3g.40gb', start: 0, size: 4, dynamic: true as const };
    const pod = holding('a', [{ uuid: migPlacementKey(key), core: 100, memoryMiB: 40448, mig: key }]);
    for (const card of [h100DynamicMigCard(0), h100DynamicMigCard(0, [['3g.40gb', 0]])]) {
      const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards: [card] }), [pod]);
      const d = node.dynamicMig[0];
      expect(d?.heldCore).toBe(50);
      expect(d?.taken.reduce((s, t) => s + t.size, 0)).toBe(4);
      const [g] = grantsOf(place([{ profile: '3g.40gb' }], [pod], [card]));
      expect(g?.mig?.start).toBe(4);
    }
  });
});

describe('dynamic-MIG cards: what the slice cards arbitrate', () => {
  it('offers the H100 table but 1g.10gb+me, whose one instance per card the slices cannot enforce', () => {
    const r = offeredProfiles(H100_MIG_PROFILES);
    expect('profiles' in r && r.profiles.map((p) => p.profile)).toEqual(
      H100_MIG_PROFILES.map((p) => p.profile).filter((p) => p !== '1g.10gb+me'),
    );
    // No set of non-overlapping placements takes more than the 7 compute slices.
    expect(mostComputeSideBySide(H100_MIG_PROFILES.filter((p) => p.profile !== '1g.10gb+me'))).toBe(7);
  });

  it('refuses a card whose table would let non-overlapping placements overspend compute', () => {
    const twoG = H100_MIG_PROFILES.find((p) => p.profile === '2g.20gb');
    const table = [
      ...H100_MIG_PROFILES,
      { ...(twoG as (typeof H100_MIG_PROFILES)[number]), placements: [0, 2, 4, 6], maxInstances: 4 },
    ];
    const r = offeredProfiles(table);
    expect(r).toEqual({
      refusal: 'dynamic MIG: placements that do not overlap could take 8 of its 7 compute slices',
    });
  });

  it('merges an instance and the held slices it sits on', () => {
    const card = {
      uuid: parent,
      index: 0,
      model: 'H100',
      numaNode: null,
      healthy: true,
      profiles: [],
      sliceMemoryMiB: 1,
    };
    const instances = [{ profile: '2g.20gb', start: 0, size: 2, computeSlices: 2 }];
    const held = new Set([0, 1, 5].map((k) => migSliceCardUuid(parent, k)));
    const d = withTakenSpans({ ...card, instances }, (u) => held.has(u));
    expect(d.heldCore).toBe(13 + 12 + 12);
    expect(d.taken).toEqual([...instances, { profile: '', start: 5, size: 1, computeSlices: 0 }]);
  });

  it('holds a dynamic grant as its slices, each charged its part of the card', () => {
    const mig = { parent, profile: '2g.20gb', start: 2, size: 2, dynamic: true as const };
    expect(ledgerUseOfGrant({ uuid: migPlacementKey(mig), core: 100, memoryMiB: 20096, mig })).toEqual([
      { uuid: migSliceCardUuid(parent, 2), core: 13, memoryMiB: 10048 },
      { uuid: migSliceCardUuid(parent, 3), core: 12, memoryMiB: 10048 },
    ]);
  });

  it('charges the 8 slices of a card 100 cores in all, a 3g.40gb half of them wherever it sits', () => {
    const cores = Array.from({ length: 8 }, (_, k) => migSliceCore(k));
    expect(cores).toEqual([13, 12, 13, 12, 13, 12, 13, 12]);
    expect(migSpanCore({ start: 0, size: 4 })).toBe(50);
    expect(migSpanCore({ start: 4, size: 4 })).toBe(50);
    expect(migSpanCore({ start: 0, size: 8 })).toBe(100);
  });
});
