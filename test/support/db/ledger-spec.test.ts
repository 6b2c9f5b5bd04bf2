import { describe, expect, it } from 'vitest';
import { type CardCapacity, checkCards, checkQuotas, type QuotaCapacity, sumDemandByCard } from './ledger-spec.js';

const card = (over: Partial<CardCapacity> = {}): CardCapacity => ({
  uuid: 'GPU-a',
  cluster: 'c1',
  node: 'n1',
  model: 'A100',
  memoryMiB: 1_000,
  isPresent: true,
  coreUsed: 0,
  memoryUsedMiB: 0,
  ...over,
});
const quota = (over: Partial<QuotaCapacity> = {}): QuotaCapacity => ({
  name: 'q',
  scope: 'namespace',
  cluster: 'c1',
  namespace: 'ml',
  team: null,
  gpuModel: '',
  coreLimit: 100,
  memoryLimitMiB: 1_000,
  coreUsed: 0,
  memoryUsedMiB: 0,
  ...over,
});
const where = { cluster: 'c1', node: 'n1' };

describe('sumDemandByCard', () => {
  it('adds containers that share a card and sorts by card (the lock order)', () => {
    expect(
      sumDemandByCard([
        { cardUuid: 'GPU-b', core: 10, memoryMiB: 1 },
        { cardUuid: 'GPU-a', core: 20, memoryMiB: 2 },
        { cardUuid: 'GPU-b', core: 30, memoryMiB: 3 },
      ]),
    ).toEqual([
      { cardUuid: 'GPU-a', core: 20, memoryMiB: 2 },
      { cardUuid: 'GPU-b', core: 40, memoryMiB: 4 },
    ]);
  });
});

describe('checkCards', () => {
  it.each([
    ['fits exactly', card({ coreUsed: 70, memoryUsedMiB: 500 }), 30, 500, []],
    [
      'one core over',
      card({ coreUsed: 71 }),
      30,
      0,
      ['capacity-conflict: card GPU-a has 29 core free, pod asks 30 (over by 1)'],
    ],
    [
      'one MiB over',
      card({ memoryUsedMiB: 501 }),
      1,
      500,
      ['capacity-conflict: card GPU-a has 499 MiB free, pod asks 500 MiB (over by 1 MiB)'],
    ],
    [
      'gone from its node',
      card({ isPresent: false }),
      1,
      1,
      ['capacity-conflict: card GPU-a is no longer reported by n1'],
    ],
    ['on another node', card({ node: 'n2' }), 1, 1, ['invalid: card GPU-a is on c1/n2, not on c1/n1']],
    ['in another cluster', card({ cluster: 'c2' }), 1, 1, ['invalid: card GPU-a is on c2/n1, not on c1/n1']],
  ])('%s', (_name, row, core, memoryMiB, want) => {
    const got = checkCards(where, [row], [{ cardUuid: 'GPU-a', core, memoryMiB }]).map(
      (v) => `${v.code}: ${v.message}`,
    );
    expect(got).toEqual(want);
  });

  it('reports an unknown card and every card that is short, not only the first', () => {
    const got = checkCards(
      where,
      [card({ coreUsed: 100 }), card({ uuid: 'GPU-b', coreUsed: 100 })],
      [
        { cardUuid: 'GPU-a', core: 1, memoryMiB: 0 },
        { cardUuid: 'GPU-b', core: 1, memoryMiB: 0 },
        { cardUuid: 'GPU-x', core: 1, memoryMiB: 0 },
      ],
    );
    expect(got.map((v) => v.code)).toEqual(['capacity-conflict', 'capacity-conflict', 'not-found']);
  });
});

describe('checkQuotas', () => {
  const models: Record<string, string> = { 'GPU-a': 'A100', 'GPU-t': 'T4' };
  const modelOf = (uuid: string) => models[uuid];

  it.each([
    ['within', quota({ coreUsed: 50 }), [{ cardUuid: 'GPU-a', core: 50, memoryMiB: 0 }], []],
    [
      'core over',
      quota({ coreUsed: 60 }),
      [{ cardUuid: 'GPU-a', core: 50, memoryMiB: 0 }],
      ['quota q (namespace c1/ml): core limit 100, in use 60, pod asks 50 (over by 10)'],
    ],
    [
      'memory over, team',
      quota({ scope: 'team', team: 'vision', cluster: null, namespace: null, memoryUsedMiB: 999 }),
      [{ cardUuid: 'GPU-a', core: 1, memoryMiB: 2 }],
      ['quota q (team vision): memory limit 1000 MiB, in use 999 MiB, pod asks 2 MiB (over by 1 MiB)'],
    ],
    [
      'model quota ignores other models',
      quota({ gpuModel: 'T4', coreLimit: 10 }),
      [{ cardUuid: 'GPU-a', core: 100, memoryMiB: 0 }],
      [],
    ],
    [
      'model quota counts its model only',
      quota({ gpuModel: 'T4', coreLimit: 10 }),
      [
        { cardUuid: 'GPU-a', core: 100, memoryMiB: 0 },
        { cardUuid: 'GPU-t', core: 20, memoryMiB: 0 },
      ],
      ['quota q (namespace c1/ml, model T4): core limit 10, in use 0, pod asks 20 (over by 10)'],
    ],
    [
      'a limit lowered below use refuses any more',
      quota({ coreLimit: 10, coreUsed: 40 }),
      [{ cardUuid: 'GPU-a', core: 1, memoryMiB: 0 }],
      ['quota q (namespace c1/ml): core limit 10, in use 40, pod asks 1 (over by 31)'],
    ],
  ])('%s', (_name, q, demand, want) => {
    expect(checkQuotas([q], demand, modelOf).map((v) => v.message)).toEqual(want);
  });
});
