import { describe, expect, it } from 'vitest';
import { H100_MIG_PROFILES } from '../../test/support/control-plane/builders.js';
import { type DynamicMigCard, type MigSpan, planMigPlacement } from './mig-planner.js';

/** A span as an H100 instance (or hold) of `profile` at `start` takes it. */
function span(profile: string, start: number): MigSpan {
  const p = H100_MIG_PROFILES.find((x) => x.profile === profile);
  if (!p) throw new Error(`no H100 profile ${profile}`);
  return { profile, start, size: p.memorySlices, computeSlices: p.computeSlices };
}

function h100(index: number, taken: [string, number][] = []): DynamicMigCard {
  return { uuid: `GPU-${index}`, index, profiles: H100_MIG_PROFILES, taken: taken.map(([p, s]) => span(p, s)) };
}

function placed(cards: DynamicMigCard[], profile: string, pending: string[] = []) {
  const r = planMigPlacement(cards, profile, pending);
  if (!r.ok) throw new Error(r.message);
  return [r.plan.cardIndex, r.plan.start, r.plan.size];
}

describe('planMigPlacement: legal placements of the H100 80GB', () => {
  it.each([
    ['1g.10gb', [0, 1, 2, 3, 4, 5, 6], 1],
    ['1g.20gb', [0, 2, 4, 6], 2],
    ['2g.20gb', [0, 2, 4], 2],
    ['3g.40gb', [0, 4], 4],
    ['4g.40gb', [0], 4],
    ['7g.80gb', [0], 8],
  ] as const)('%s is placed only at %j, %i slices wide', (profile, starts, size) => {
    // Every start but one taken by 1g.10gb spans: whatever the planner picks must be a legal start.
    for (const start of starts) {
      const blockers = [0, 1, 2, 3, 4, 5, 6, 7]
        .filter((s) => s < start || s >= start + size)
        .filter((s) => s <= 6)
        .map((s): [string, number] => ['1g.10gb', s]);
      const card = h100(0, []);
      const free = { ...card, taken: blockers.map(([p, s]) => span(p, s)), profiles: card.profiles };
      // Compute is not the question here: leave room for it.
      const roomy = { ...free, taken: free.taken.map((t) => ({ ...t, computeSlices: 0 })) };
      const r = planMigPlacement([roomy], profile);
      expect(r.ok && [r.plan.start, r.plan.size]).toEqual([start, size]);
    }
  });

  it('never places across a taken slice and answers which slices are free', () => {
    const r = planMigPlacement([h100(0, [['1g.10gb', 3]])], '4g.40gb');
    expect(r).toEqual({
      ok: false,
      message: 'no free 4g.40gb placement on a dynamic-MIG card (card 0 free memory slices 0-2,4-7)',
    });
  });

  it('two 3g.40gb strand one compute slice: nothing more fits, not even a 1g.10gb', () => {
    const card = h100(0, [
      ['3g.40gb', 0],
      ['3g.40gb', 4],
    ]);
    expect(planMigPlacement([card], '1g.10gb').ok).toBe(false);
  });

  it('counts compute slices: 4g.40gb with 3g.40gb uses all seven, and a 3g beside a 4g fits', () => {
    expect(placed([h100(0, [['4g.40gb', 0]])], '3g.40gb')).toEqual([0, 4, 4]);
    expect(placed([h100(0, [['3g.40gb', 4]])], '4g.40gb')).toEqual([0, 0, 4]);
    // Three 2g.20gb and a 1g.20gb take all seven compute slices: the free slice 7 serves nothing.
    const full = h100(0, [
      ['2g.20gb', 0],
      ['2g.20gb', 2],
      ['2g.20gb', 4],
      ['1g.20gb', 6],
    ]);
    expect(planMigPlacement([full], '1g.10gb').ok).toBe(false);
  });

  it('seven 1g.10gb fill slices 0..6; an eighth has no placement', () => {
    const cards = [h100(0)];
    const starts: number[] = [];
    for (let k = 0; k < 7; k++) {
      const r = planMigPlacement(cards, '1g.10gb');
      if (!r.ok) throw new Error(r.message);
      starts.push(r.plan.start);
      cards[0] = {
        ...(cards[0] as DynamicMigCard),
        taken: [...(cards[0] as DynamicMigCard).taken, span('1g.10gb', r.plan.start)],
      };
    }
    expect([...starts].sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(planMigPlacement(cards, '1g.10gb').ok).toBe(false);
  });

  it('refuses a profile past its instance count (1g.10gb+me: one per card)', () => {
    expect(planMigPlacement([h100(0, [['1g.10gb+me', 6]])], '1g.10gb+me').ok).toBe(false);
  });

  it('a ledger hold in flight takes its slices like an instance', () => {
    expect(placed([h100(0, [['3g.40gb', 0]])], '3g.40gb')).toEqual([0, 4, 4]);
  });
});

describe('planMigPlacement: best fit', () => {
  it('a lone 1g.10gb goes to slice 6, keeping 0..5 open for a 3g at 0 and a 2g at 4', () => {
    expect(placed([h100(0)], '1g.10gb')).toEqual([0, 6, 1]);
  });

  it('fills the partly used card before cutting an empty one', () => {
    expect(placed([h100(0), h100(1, [['3g.40gb', 0]])], '2g.20gb')).toEqual([1, 4, 2]);
    expect(placed([h100(0), h100(1, [['3g.40gb', 0]])], '3g.40gb')).toEqual([1, 4, 4]);
  });

  it('a 1g.20gb beside a 3g at 0 takes slices 6-7, keeping 4-5 for a 2g', () => {
    expect(placed([h100(0, [['3g.40gb', 0]])], '1g.20gb')).toEqual([0, 6, 2]);
  });

  it('ties go to the lower card index', () => {
    expect(placed([h100(1), h100(0)], '7g.80gb')).toEqual([0, 0, 8]);
  });

  it('explains a node with no dynamic-MIG card and one whose cards lack the profile', () => {
    expect(planMigPlacement([], '3g.40gb')).toEqual({
      ok: false,
      message: 'no card here is configured for dynamic MIG (asked 3g.40gb)',
    });
    expect(planMigPlacement([h100(0)], '3g.71gb')).toEqual({
      ok: false,
      message: 'no dynamic-MIG card here offers 3g.71gb',
    });
  });
});

describe('planMigPlacement: other pending requests', () => {
  it('a 7g.80gb pending: the 1g goes to the card already cut, next to the first (3g at 4 stays open)', () => {
    const cards = [h100(0, [['1g.10gb', 0]]), h100(1)];
    expect(placed(cards, '1g.10gb', ['7g.80gb'])).toEqual([0, 1, 1]);
  });

  it('a 4g.40gb pending: a 2g goes to 4, not 0', () => {
    expect(placed([h100(0, [['1g.20gb', 6]])], '2g.20gb', ['4g.40gb'])).toEqual([0, 4, 2]);
  });

  it('gives up the locally best placement when it would strand a pending request', () => {
    // Card 0 has slices 0-3 free, card 1 slices 4-7. A 2g.20gb fits either; card 0 keeps more
    // placements open, so alone it goes there, but a 4g.40gb (only at 0) would then fit nowhere.
    const cards = [h100(0, [['3g.40gb', 4]]), h100(1, [['3g.40gb', 0]])];
    expect(placed(cards, '2g.20gb')).toEqual([0, 0, 2]);
    expect(placed(cards, '2g.20gb', ['4g.40gb'])).toEqual([1, 4, 2]);
  });

  it('when not every pending request can fit, keeps the most of them', () => {
    // A 1g.20gb on card 1 (empty) would take the only home of the 7g; card 0 has room at 6.
    const cards = [
      h100(0, [
        ['3g.40gb', 0],
        ['2g.20gb', 4],
      ]),
      h100(1),
    ];
    expect(placed(cards, '1g.20gb', ['7g.80gb', '4g.40gb'])).toEqual([0, 6, 2]);
  });

  it('a pending request that fits nowhere anyway changes nothing', () => {
    const cards = [h100(0, [['3g.40gb', 4]]), h100(1, [['3g.40gb', 0]])];
    expect(placed(cards, '2g.20gb', ['7g.80gb'])).toEqual([0, 0, 2]);
  });
});
