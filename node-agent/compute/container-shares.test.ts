import { describe, expect, it } from 'vitest';
import { createCardSampler } from './card-sampler.js';
import { computeContainerShares } from './container-shares.js';

const owner = (pid: number) => (pid < 100 ? 'pod-a/c1' : pid < 200 ? 'pod-b/c1' : null);

describe('computeContainerShares', () => {
  it('averages each process over the card intervals and sums processes per container', () => {
    const shares = computeContainerShares(
      [
        { pid: 1, timestampUs: 110, smPercent: 20 },
        { pid: 1, timestampUs: 120, smPercent: 40 },
        { pid: 2, timestampUs: 120, smPercent: 5 }, // idle in the first interval
        { pid: 150, timestampUs: 110, smPercent: 50 },
        { pid: 150, timestampUs: 120, smPercent: 50 },
        { pid: 900, timestampUs: 110, smPercent: 10 },
        { pid: 1, timestampUs: 90, smPercent: 100 }, // older than the window
      ],
      owner,
      70,
      100,
    );
    expect(shares.byContainer.get('pod-a/c1')).toBe(3250);
    expect(shares.byContainer.get('pod-b/c1')).toBe(5000);
    expect(shares.unattributedBp).toBe(500);
    // The processes add up to 87.5 %: more than NVML's card figure, so the card is at least that busy.
    expect(shares.cardBusyBp).toBe(8750);
    expect(shares.newestUs).toBe(120);
    expect(shares.intervals).toBe(2);
  });

  it('no samples: nobody measured, card busy as NVML says, window kept', () => {
    const shares = computeContainerShares([], owner, 12, 500);
    expect(shares.byContainer.size).toBe(0);
    expect(shares.cardBusyBp).toBe(1200);
    expect(shares.newestUs).toBe(500);
  });
});

describe('createCardSampler', () => {
  it('publishes nothing while the driver has no new interval', () => {
    let written = 0;
    const sampler = createCardSampler({
      cardIndex: 0,
      periodMs: 100,
      nowMs: () => 5_000,
      source: { processUtilization: () => [], utilizationRates: () => ({ gpuPercent: 50 }) },
      placement: { containersOn: () => [{ key: 'k', regionPath: '/r', deviceIndex: 0 }], containerOfPid: () => 'k' },
      write: () => {
        written++;
        return true;
      },
    });
    sampler.sampleOnce();
    expect(written).toBe(0);
  });

  it('measures every container on an idle card at 0, once per tick, and asks only for newer samples', () => {
    let now = 5_000;
    const asked: number[] = [];
    const writes: { measured: number; busy: number; time: number; period: number }[] = [];
    const sampler = createCardSampler({
      cardIndex: 0,
      periodMs: 100,
      nowMs: () => now,
      source: {
        processUtilization: (_card, since) => {
          asked.push(since);
          return [];
        },
        utilizationRates: () => ({ gpuPercent: 0 }),
      },
      placement: { containersOn: () => [{ key: 'k', regionPath: '/r', deviceIndex: 0 }], containerOfPid: () => 'k' },
      write: (_path, _index, s) => {
        writes.push({ measured: s.measuredShareBp, busy: s.cardBusyBp, time: s.timeMs, period: s.periodMs });
        return true;
      },
    });
    now += 100;
    sampler.sampleOnce();
    sampler.sampleOnce(); // the same tick again: no time has passed, nothing new to say
    now += 250;
    sampler.sampleOnce();
    // No period: the limiter restarts its window rather than learn from a tick NVML may not have caught up with.
    expect(writes).toEqual([
      { measured: 0, busy: 0, time: 5_100, period: 0 },
      { measured: 0, busy: 0, time: 5_350, period: 0 },
    ]);
    expect(asked).toEqual([5_000_000, 5_100_000, 5_100_000]);
  });

  it('writes every placed container once per period, idle ones with 0, and asks only for newer samples', () => {
    let now = 1_000_000;
    const asked: number[] = [];
    const writes: { path: string; index: number; measured: number; busy: number; period: number }[] = [];
    const sampler = createCardSampler({
      cardIndex: 3,
      periodMs: 100,
      nowMs: () => now,
      source: {
        processUtilization: (card, since) => {
          expect(card).toBe(3);
          asked.push(since);
          return [{ pid: 7, timestampUs: since + 50_000, smPercent: 30 }];
        },
        utilizationRates: () => ({ gpuPercent: 30 }),
      },
      placement: {
        containersOn: () => [
          { key: 'pod-a/c1', regionPath: '/r/a', deviceIndex: 0 },
          { key: 'pod-b/c1', regionPath: '/r/b', deviceIndex: 1 },
        ],
        containerOfPid: owner,
      },
      write: (path, index, s) => {
        writes.push({ path, index, measured: s.measuredShareBp, busy: s.cardBusyBp, period: s.periodMs });
        return true;
      },
    });
    now += 100;
    sampler.sampleOnce();
    now += 100;
    sampler.sampleOnce();
    expect(writes.slice(0, 2)).toEqual([
      { path: '/r/a', index: 0, measured: 3000, busy: 3000, period: 50 },
      { path: '/r/b', index: 1, measured: 0, busy: 3000, period: 50 },
    ]);
    expect(asked[1]).toBe((asked[0] as number) + 50_000);
  });
});
