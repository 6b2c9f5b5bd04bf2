import { describe, expect, it } from 'vitest';
import { peekAssignment } from '../../contract/index.js';
import {
  assignedPod,
  buildNodeSnapshot,
  type CardSpec,
  cardUuid,
  gpuNode,
  gpuPod,
  h100MigCard,
  type MigContainerSpec,
  migAssignedPod,
  migPod,
  migUuid,
  policy,
} from '../../test/support/control-plane/builders.js';
import type { PodWithStatus } from './cluster-snapshot.js';
import { type FitContext, fitPod } from './fit.js';
import { judgePodAssignment } from './holds/assignment-check.js';
import { judgeNode } from './node-verdict.js';
import { type PlacementPolicy, readPlacementRequest } from './placement-request.js';
import { utilizationAfter } from './score.js';

const NOW = Date.parse('2026-11-22T04:00:30Z');
const ctx: FitContext = { nowMs: NOW, heartbeatStaleMs: 60_000 };

/** Card 0: two 3g.40gb; card 1: 1g.10gb at 0, 1g.20gb at 2, 2g.20gb at 4; card 2: no MIG. */
const layout: CardSpec[] = [
  h100MigCard(0, [
    ['3g.40gb', 0],
    ['3g.40gb', 4],
  ]),
  h100MigCard(1, [
    ['1g.10gb', 0],
    ['1g.20gb', 2],
    ['2g.20gb', 4],
  ]),
  { model: 'NVIDIA H100 80GB HBM3', memoryMiB: 81559 },
];

function node(pods: PodWithStatus[] = [], cards: CardSpec[] = layout, name = 'n1') {
  return buildNodeSnapshot(gpuNode({ name, cards }), pods);
}

function placeMig(
  containers: MigContainerSpec[],
  pods: PodWithStatus[] = [],
  cards: CardSpec[] = layout,
  p: PlacementPolicy = 'binpack',
) {
  return fitPod(readPlacementRequest(migPod('p', containers), policy, p), node(pods, cards), ctx);
}

const held = (name: string, card: number, start: number, profile = '3g.40gb', size = 4, memoryMiB = 40448) =>
  migAssignedPod(name, 'n1', [
    { uuid: migUuid(card, start), parent: cardUuid('n1', card), profile, start, size, memoryMiB },
  ]);

describe('fitPod: whole MIG instances', () => {
  it('grants a free instance of the profile whole, charged the half of its card it spans', () => {
    const r = placeMig([{ profile: '3g.40gb' }]);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.placement.containers[0]?.cards).toEqual([
      {
        uuid: migUuid(0, 0),
        core: 100,
        memoryMiB: 40448,
        mig: { parent: cardUuid('n1', 0), profile: '3g.40gb', start: 0, size: 4 },
      },
    ]);
    expect([...r.placement.cardUse]).toEqual([[migUuid(0, 0), { core: 50, memoryMiB: 40448 }]]);
  });

  it('lands a 1g.20gb on the legal placement the card has it at', () => {
    const r = placeMig([{ profile: '1g.20gb' }]);
    expect(r.ok && r.placement.containers[0]?.cards[0]?.mig).toEqual({
      parent: cardUuid('n1', 1),
      profile: '1g.20gb',
      start: 2,
      size: 2,
    });
  });

  it('never gives a held instance again: the third 3g.40gb waits', () => {
    const one = placeMig([{ profile: '3g.40gb' }], [held('a', 0, 0)]);
    expect(one.ok && one.placement.containers[0]?.cards[0]?.uuid).toBe(migUuid(0, 4));
    expect(placeMig([{ profile: '3g.40gb' }], [held('a', 0, 0), held('b', 0, 4)])).toEqual({
      ok: false,
      refusal: { reason: 'insufficient-mig-instances', message: 'needs 1 free MIG 3g.40gb instance; 0 of 2 free' },
    });
    expect(placeMig([{ profile: '3g.40gb', count: 3 }])).toMatchObject({
      refusal: { reason: 'insufficient-mig-instances', message: 'needs 3 free MIG 3g.40gb instances; 2 of 2 free' },
    });
  });

  it.each([
    [
      'a profile the node has no instance of',
      '2g.35gb',
      layout,
      'no MIG 2g.35gb instance here (instances: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb)',
    ],
    ['a node without MIG', '3g.40gb', [{}, {}], 'no MIG 3g.40gb instance: no card here is in MIG mode with instances'],
    [
      'instances on an unhealthy card',
      '3g.40gb',
      [h100MigCard(0, [['3g.40gb', 0]], { healthy: false, healthReason: 'Xid 79' })],
      'every MIG 3g.40gb instance here is on an unhealthy card (Xid 79)',
    ],
  ])('refuses %s, saying why, as no eviction can cure', (_name, profile, cards, message) => {
    expect(placeMig([{ profile }], [], cards)).toEqual({ ok: false, refusal: { reason: 'no-matching-card', message } });
  });

  it('binpacks onto the card whose instances are already held, spreads onto the emptier one', () => {
    const cards = [
      h100MigCard(0, [
        ['1g.10gb', 0],
        ['1g.10gb', 1],
      ]),
      h100MigCard(1, [
        ['1g.10gb', 0],
        ['1g.10gb', 1],
      ]),
    ];
    const pods = [held('a', 1, 0, '1g.10gb', 1, 9984)];
    const pick = (p: PlacementPolicy) => {
      const r = placeMig([{ profile: '1g.10gb' }], pods, cards, p);
      return r.ok ? r.placement.containers[0]?.cards[0]?.uuid : r.refusal.message;
    };
    expect(pick('binpack')).toBe(migUuid(1, 1));
    expect(pick('spread')).toBe(migUuid(0, 0));
  });

  it('keeps instances and cards apart: shares go to the card out of MIG mode, never to an instance', () => {
    const share = fitPod(
      readPlacementRequest(gpuPod('s', [{ core: 30, memoryMiB: 1024 }]), policy, 'binpack'),
      node(),
      ctx,
    );
    expect(share.ok && [...share.placement.cardUse.keys()]).toEqual([cardUuid('n1', 2)]);
    const onlyMig = [h100MigCard(0, [['3g.40gb', 0]])];
    const whole = fitPod(readPlacementRequest(gpuPod('w', [{ core: 100 }]), policy, 'binpack'), node([], onlyMig), ctx);
    expect(whole.ok).toBe(false);
  });

  it('places a pod of instances and a share, and lets an init container use the instance its app container holds', () => {
    const pod = migPod('p', [
      { name: 'train', profile: '2g.20gb' },
      { name: 'warm', profile: '2g.20gb', init: true },
    ]);
    pod.spec?.containers?.push({
      name: 'side',
      resources: { limits: { [policy.names.core]: '20', [policy.names.memory]: '512' } },
    } as never);
    const r = fitPod(readPlacementRequest(pod, policy, 'binpack'), node(), ctx);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.placement.containers.map((c) => [c.name, c.cards.map((g) => g.uuid)])).toEqual([
      ['warm', [migUuid(1, 4)]],
      ['train', [migUuid(1, 4)]],
      ['side', [cardUuid('n1', 2)]],
    ]);
    expect(r.placement.cardUse.get(migUuid(1, 4))).toEqual({ core: 25, memoryMiB: 20096 });
  });

  it('scores a node by the part of its cards its held instances span: binpack prefers the fuller one', () => {
    const req = readPlacementRequest(migPod('p', [{ profile: '3g.40gb' }]), policy, 'binpack');
    const fuller = node([held('a', 0, 0)]);
    const empty = node([], layout, 'n2');
    const a = judgeNode(req, fuller, ctx);
    const b = judgeNode(req, empty, { ...ctx });
    expect(a.ok && b.ok).toBe(true);
    if (a.ok && b.ok) expect(a.score).toBeGreaterThan(b.score);
  });
});

describe('a MIG grant held against the pod it names', () => {
  const verdict = (pod: PodWithStatus) =>
    judgePodAssignment(
      pod,
      (token) => {
        const assignment = peekAssignment(token);
        return assignment ? { ok: true, assignment } : undefined;
      },
      policy,
    );

  it('holds when the pod asks that profile, and is a spec mismatch when it asks cards or another profile', () => {
    const pod = held('a', 0, 0);
    expect(verdict(pod).kind).toBe('held');
    const asksOther = { ...pod, spec: migPod('a', [{ name: 'm0', profile: '1g.10gb' }]).spec } as PodWithStatus;
    expect(verdict(asksOther)).toMatchObject({
      kind: 'refused',
      reason: 'spec-mismatch',
      message: `the assignment container m0: grants MIG 3g.40gb instance ${migUuid(0, 0)}, asks MIG 1g.10gb instances`,
    });
    const asksCard = { ...pod, spec: gpuPod('a', [{ name: 'm0', core: 100 }]).spec } as PodWithStatus;
    expect(verdict(asksCard)).toMatchObject({ kind: 'refused', reason: 'spec-mismatch' });
  });
});

describe('fitPod: shares inside a shared MIG instance', () => {
  /** Card 0: a whole 3g.40gb at 0 and a shared one at 4; nothing else on the node. */
  const sharedLayout = (): CardSpec[] => {
    const card = h100MigCard(0, [
      ['3g.40gb', 0],
      ['3g.40gb', 4],
    ]);
    const instances = card.mig?.instances.map((i) => (i.placement.start === 4 ? { ...i, shared: true } : i)) ?? [];
    return [{ ...card, mig: { ...(card.mig as NonNullable<CardSpec['mig']>), instances } }];
  };
  const shared = migUuid(0, 4);
  const share = (name: string, pods: PodWithStatus[] = [], core = 50, memoryMiB = 4096) =>
    fitPod(
      readPlacementRequest(gpuPod(name, [{ core, memoryMiB }]), policy, 'binpack'),
      node(pods, sharedLayout()),
      ctx,
    );
  const heldShare = (name: string) =>
    assignedPod(name, 'n1', [{ core: 50, memoryMiB: 4096, cards: [0], uuids: [shared] }]);

  it('places a share on the shared instance like on a card: core 100 is the instance, memory its own', () => {
    const r = share('a');
    expect(r.ok && r.placement.containers[0]?.cards).toEqual([{ uuid: shared, core: 50, memoryMiB: 4096 }]);
    expect(r.ok && [...r.placement.cardUse]).toEqual([[shared, { core: 50, memoryMiB: 4096 }]]);
    const snapshot = node([], sharedLayout());
    expect(snapshot.cards.find((c) => c.uuid === shared)).toMatchObject({
      memoryMiB: 40448,
      sharedMig: { parentUuid: cardUuid('n1', 0), profile: '3g.40gb', start: 4, size: 4 },
    });
  });

  it('counts the shared instance as part of its card in the node totals, not as one more card', () => {
    const idle = node([], sharedLayout());
    expect(idle.totals).toEqual({ cards: 1, usedCore: 0, usedMemoryMiB: 0, memoryMiB: 81559 });
    // 50 core of a 3g instance (half the card's 8 slices) is a quarter of the card.
    const busy = node([heldShare('a')], sharedLayout());
    expect(busy.totals).toEqual({ cards: 1, usedCore: 25, usedMemoryMiB: 4096, memoryMiB: 81559 });
    const r = share('b', [heldShare('a')]);
    expect(r.ok && utilizationAfter(busy, r.placement)).toBeCloseTo((50 / 100 + 8192 / 81559) / 2, 6);
  });

  it('fits two 50-core shares, refuses a third, and refuses memory past the instance', () => {
    expect(share('b', [heldShare('a')]).ok).toBe(true);
    expect(share('c', [heldShare('a'), heldShare('b')]).ok).toBe(false);
    expect(share('d', [], 10, 40449).ok).toBe(false);
  });

  it('never offers the shared instance whole: not as a whole card, not as a mig-3g.40gb instance', () => {
    expect(share('w', [], 100, 1).ok).toBe(false);
    const whole = placeMig([{ profile: '3g.40gb' }], [], sharedLayout());
    expect(whole.ok && whole.placement.containers[0]?.cards[0]?.uuid).toBe(migUuid(0, 0));
    expect(placeMig([{ profile: '3g.40gb' }], [held('x', 0, 0)], sharedLayout())).toMatchObject({
      refusal: { message: 'needs 1 free MIG 3g.40gb instance; 0 of 1 free' },
    });
  });
});
