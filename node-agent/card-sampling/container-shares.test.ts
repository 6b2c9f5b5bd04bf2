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

type ProcessSample = { pid: number; timestampUs: number; smPercent: number };

/** A sampler of card 0 with one container `k`, its NVML answers from `samples`, its writes recorded. */
function recordingSampler(opts: {
  nowMs: () => number;
  samples: (since: number) => ProcessSample[];
  idleAfterMs?: number;
}) {
  const writes: { measured: number; time: number; period: number }[] = [];
  const sampler = createCardSampler({
    cardIndex: 0,
    periodMs: 50,
    nowMs: opts.nowMs,
    ...(opts.idleAfterMs === undefined ? {} : { idleAfterMs: opts.idleAfterMs }),
    source: {
      processUtilization: (_card, since) => opts.samples(since),
      // A tenant under 1 % of the card: NVML's whole percent rounds the card down to 0 as well.
      utilizationRates: () => ({ gpuPercent: 0 }),
    },
    placement: { containersOn: () => [{ key: 'k', regionPath: '/r', deviceIndex: 0 }], containerOfPid: () => 'k' },
    write: (_path, _index, s) => {
      writes.push({ measured: s.measuredShareBp, time: s.timeMs, period: s.periodMs });
      return true;
    },
  });
  return { sampler, writes };
}

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

  it('measures every container on an idle card at 0, once per tick, without moving its NVML cursor', () => {
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
    // NVML had nothing newer than the start: an idle tick's own time is not an NVML stamp.
    expect(asked).toEqual([5_000_000, 5_000_000, 5_000_000]);
  });

  it('counts a card idle only after NVML stayed silent for idleAfterMs, not when a light tenant rounds to 0', () => {
    let now = 5_000;
    let next: ProcessSample[] = [];
    const { sampler, writes } = recordingSampler({
      nowMs: () => now,
      idleAfterMs: 500,
      samples: () => {
        const out = next;
        next = [];
        return out;
      },
    });
    now += 50;
    next = [{ pid: 9, timestampUs: 5_040_000, smPercent: 0 }];
    sampler.sampleOnce();
    for (let tick = 0; tick < 9; tick++) {
      now += 50; // between NVML's intervals: nothing new, card at "0 %"
      sampler.sampleOnce();
    }
    expect(writes).toEqual([{ measured: 0, time: 5_040, period: 40 }]);
    now += 50; // 500 ms without a process sample: idle
    sampler.sampleOnce();
    expect(writes.at(-1)).toEqual({ measured: 0, time: 5_550, period: 0 });
  });

  it('keeps asking NVML from its own newest stamp, so samples stamped before an idle tick still arrive', () => {
    let now = 5_000;
    const asked: number[] = [];
    let next: ProcessSample[] = [];
    const { sampler, writes } = recordingSampler({
      nowMs: () => now,
      samples: (since) => {
        asked.push(since);
        const out = next.filter((s) => s.timestampUs > since);
        next = [];
        return out;
      },
    });
    now += 100;
    sampler.sampleOnce(); // idle card: published at this tick's time
    now += 50;
    // A tenant started at 5 060; NVML publishes its interval ending at 5 080 late, at 5 150.
    next = [{ pid: 9, timestampUs: 5_080_000, smPercent: 40 }];
    sampler.sampleOnce();
    now += 50;
    next = [{ pid: 9, timestampUs: 5_180_000, smPercent: 70 }];
    sampler.sampleOnce();
    expect(asked).toEqual([5_000_000, 5_000_000, 5_080_000]);
    expect(writes).toEqual([
      { measured: 0, time: 5_100, period: 0 },
      { measured: 4000, time: 5_080, period: 0 }, // stamped before the idle tick: nothing to tile with
      { measured: 7000, time: 5_180, period: 100 },
    ]);
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
