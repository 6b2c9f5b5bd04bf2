import { describe, expect, it } from 'vitest';
import { UsageReportError, type UsageSample, type UsageSink } from './usage.js';
import { UsageBacklog } from './usage-backlog.js';

/** A control plane that takes reports only while `up`, recording the time of each it took. */
function controlPlane() {
  const cp = { up: true, refuseForGood: new Set<number>(), taken: [] as number[] };
  const sink: UsageSink = {
    async report(_node, _samples, at) {
      if (cp.refuseForGood.has(at.getTime())) throw new UsageReportError('HTTP 400: at: too old', false);
      if (!cp.up) throw new UsageReportError('HTTP 503: the ledger cannot be reached', true);
      cp.taken.push(at.getTime());
    },
  };
  return { cp, sink };
}
const samples = (n: number) => Array.from({ length: n }, () => ({}) as UsageSample);

describe('UsageBacklog', () => {
  it('keeps what could not be sent and sends it, oldest first, before the next report', async () => {
    const { cp, sink } = controlPlane();
    const backlog = new UsageBacklog(sink);
    cp.up = false;
    for (const at of [1, 2, 3]) await expect(backlog.report('n', samples(1), new Date(at), 10)).rejects.toThrow(/kept/);
    expect(backlog.pending()).toBe(3);
    cp.up = true;
    await backlog.report('n', samples(1), new Date(4), 10);
    expect(cp.taken).toEqual([1, 2, 3, 4]);
    expect(backlog.pending()).toBe(0);
  });

  it('is bounded: past its bounds the oldest reports go, and say so', async () => {
    const { cp, sink } = controlPlane();
    const dropped: number[] = [];
    const backlog = new UsageBacklog(sink, { maxReports: 3, maxSamples: 10, onDropped: (n) => dropped.push(n) });
    cp.up = false;
    for (const at of [1, 2, 3, 4]) await backlog.report('n', samples(2), new Date(at), 10).catch(() => undefined);
    expect(backlog.pending()).toBe(3);
    await backlog.report('n', samples(9), new Date(5), 10).catch(() => undefined);
    // Three reports of 2 and one of 9 are past 10 samples: the three older go, the newest stays.
    expect(backlog.pending()).toBe(1);
    expect(dropped).toEqual([1, 3]);
    cp.up = true;
    await backlog.report('n', samples(1), new Date(6), 10);
    expect(cp.taken).toEqual([5, 6]);
  });

  it('gives up a report the control plane refuses for good, and sends the rest', async () => {
    const { cp, sink } = controlPlane();
    const dropped: string[] = [];
    const backlog = new UsageBacklog(sink, { onDropped: (_n, why) => dropped.push(why) });
    cp.up = false;
    await backlog.report('n', samples(1), new Date(1), 10).catch(() => undefined);
    cp.up = true;
    cp.refuseForGood.add(1);
    await expect(backlog.report('n', samples(1), new Date(2), 10)).rejects.toThrow(/too old/);
    expect(cp.taken).toEqual([2]);
    expect(dropped).toEqual(['HTTP 400: at: too old']);
    expect(backlog.pending()).toBe(0);
  });
});
