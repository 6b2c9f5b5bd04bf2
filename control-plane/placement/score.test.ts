import { describe, expect, it } from 'vitest';
import type { CardLink } from '../../contract/index.js';
import {
  assignedPod,
  buildNodeSnapshot,
  type ContainerSpec,
  cardUuid,
  gpuNode,
  gpuPod,
  policy,
} from '../../test/support/control-plane/builders.js';
import type { PodWithStatus } from './cluster-snapshot.js';
import { type FitContext, fitPod } from './fit.js';
import { type PlacementPolicy, readPlacementRequest } from './placement-request.js';
import { scoreNode } from './score.js';

const ctx: FitContext = { nowMs: Date.parse('2026-11-22T04:00:30Z'), heartbeatStaleMs: 60_000 };

function place(
  nodeName: string,
  pods: PodWithStatus[],
  containers: ContainerSpec[],
  opts: {
    policy?: PlacementPolicy;
    annotations?: Record<string, string>;
    link?: (i: number, j: number) => CardLink;
    cards?: number;
  } = {},
) {
  const node = buildNodeSnapshot(
    gpuNode({ name: nodeName, cards: opts.cards ?? 4, ...(opts.link ? { link: opts.link } : {}) }),
    pods,
  );
  const req = readPlacementRequest(
    gpuPod('p', containers, { annotations: opts.annotations ?? {} }),
    policy,
    opts.policy ?? 'binpack',
  );
  const r = fitPod(req, node, ctx);
  if (!r.ok) throw new Error(r.refusal.message);
  return { placement: r.placement, score: scoreNode(node, r.placement, req.policy) };
}

const busy = (node: string) => [
  assignedPod('a', node, [{ core: 60, memoryMiB: 40000, cards: [0] }]),
  assignedPod('b', node, [{ core: 100, memoryMiB: 81920, cards: [1, 2] }]),
];
const share: ContainerSpec[] = [{ core: 30, memoryMiB: 8192 }];

describe('node scores', () => {
  it('binpack scores the fuller node higher', () => {
    const full = place('full', busy('full'), share).score;
    const empty = place('empty', [], share).score;
    expect(full).toBeGreaterThan(empty);
  });

  it('spread scores the emptier node higher', () => {
    const full = place('full', busy('full'), share, { policy: 'spread' }).score;
    const empty = place('empty', [], share, { policy: 'spread' }).score;
    expect(empty).toBeGreaterThan(full);
  });

  it('the pod annotation overrides the cluster default', () => {
    const ann = { 'nvidia.com/vcuda-placement': 'spread' };
    const full = place('full', busy('full'), share, { annotations: ann }).score;
    const empty = place('empty', [], share, { annotations: ann }).score;
    expect(empty).toBeGreaterThan(full);
  });

  it('scores stay within 0..10', () => {
    for (const p of ['binpack', 'spread'] as const) {
      const s = place('n', busy('n'), share, { policy: p }).score;
      expect(s).toBeGreaterThanOrEqual(0);
      expect(s).toBeLessThanOrEqual(10);
    }
  });

  it('for multi-card pods a well-linked node beats a fuller, badly linked one', () => {
    const nvlink = () => ({ nvlinks: 12, pcie: 'system' as const });
    const sockets = () => ({ nvlinks: 0, pcie: 'system' as const });
    const linked = place('linked', [], [{ core: 200 }], { link: nvlink }).score;
    const fuller = place(
      'fuller',
      [assignedPod('a', 'fuller', [{ core: 50, memoryMiB: 1000, cards: [0] }])],
      [{ core: 200 }],
      { link: sockets },
    ).score;
    expect(linked).toBeGreaterThan(fuller);
  });
});

describe('card choice inside a node', () => {
  const pods = (node: string) => [assignedPod('a', node, [{ core: 70, memoryMiB: 1000, cards: [1] }])];
  it('binpack puts a share on the fullest card that fits', () => {
    expect(place('n', pods('n'), share).placement.containers[0]?.cards[0]?.uuid).toBe(cardUuid('n', 1));
  });
  it('spread puts a share on the emptiest card', () => {
    expect(place('n', pods('n'), share, { policy: 'spread' }).placement.containers[0]?.cards[0]?.uuid).not.toBe(
      cardUuid('n', 1),
    );
  });
  it('multi-card sets follow NVLink', () => {
    // cards 1 and 3 share NVLink; every other pair crosses sockets.
    const link = (i: number, j: number) =>
      (i === 1 && j === 3) || (i === 3 && j === 1)
        ? { nvlinks: 4, pcie: 'system' as const }
        : { nvlinks: 0, pcie: 'system' as const };
    const cards = place('n', [], [{ core: 200 }], { link }).placement.containers[0]?.cards.map((c) => c.uuid);
    expect(cards).toEqual([cardUuid('n', 1), cardUuid('n', 3)]);
  });
});
