import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { eventReasons, type PodEvent, VcudaError } from '../contract/index.js';
import { createEventRecorder, type EventWriter } from './event-recorder.js';

/** An Event store that behaves as the API server's: create refuses a taken name, update a missing one. */
function fakeApi() {
  const stored = new Map<string, PodEvent>();
  const writes: { verb: 'create' | 'update'; at: number; name: string }[] = [];
  const writer: EventWriter = {
    async create(ns, event) {
      const key = `${ns}/${event.metadata.name}`;
      if (stored.has(key)) throw new VcudaError('conflict', `events "${event.metadata.name}" already exists`);
      writes.push({ verb: 'create', at: Date.now(), name: event.metadata.name });
      stored.set(key, structuredClone(event));
    },
    async update(ns, event) {
      const key = `${ns}/${event.metadata.name}`;
      const old = stored.get(key);
      if (!old) throw new VcudaError('not-found', `events "${event.metadata.name}" not found`);
      writes.push({ verb: 'update', at: Date.now(), name: event.metadata.name });
      const { count, lastTimestamp, message, series } = event;
      stored.set(key, { ...old, count, lastTimestamp, message, ...(series ? { series } : {}) });
    },
  };
  return { stored, writes, writer, events: () => [...stored.values()] };
}

const pod = { namespace: 'team-a', name: 'waiting', uid: 'uid-1' };
const START = new Date('2026-11-27T10:00:00Z');

describe('the aggregating event recorder', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(START);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function recorder(api: ReturnType<typeof fakeApi>, errors: unknown[] = []) {
    return createEventRecorder({
      writer: api.writer,
      component: 'vcuda-scheduler-extender',
      host: 'replica-0',
      clock: () => new Date(),
      onError: (err) => errors.push(err),
    });
  }

  it('a pod waiting 2 minutes for quota (refused every 5 s) has one Event with its count, written at most once a minute', async () => {
    const api = fakeApi();
    const events = recorder(api);
    for (let t = 0; t <= 120_000; t += 5_000) {
      vi.setSystemTime(START.getTime() + t);
      events.record(pod, eventReasons.bindConflict, `quota: namespace team-a is full (try ${t / 5_000})`);
      await vi.advanceTimersByTimeAsync(t === 120_000 ? 0 : 5_000);
    }
    await vi.advanceTimersByTimeAsync(60_000);
    const [event, ...others] = api.events();
    expect(others).toEqual([]);
    expect(event).toMatchObject({
      reason: 'VcudaBindConflict',
      type: 'Warning',
      count: 25,
      firstTimestamp: '2026-11-27T10:00:00.000Z',
      lastTimestamp: '2026-11-27T10:02:00.000Z',
      message: 'quota: namespace team-a is full (try 24)',
      series: { count: 25, lastObservedTime: '2026-11-27T10:02:00.000000Z' },
      involvedObject: { kind: 'Pod', namespace: 'team-a', name: 'waiting', uid: 'uid-1' },
    });
    // Created at 0 s, then updated at 60, 120 and (the repeat seen at 120 s) 180 s: once a minute at most.
    expect(api.writes.map((w) => [w.verb, (w.at - START.getTime()) / 1000])).toEqual([
      ['create', 0],
      ['update', 60],
      ['update', 120],
      ['update', 180],
    ]);
    events.close();
  });

  it('another reason, or another pod of the same name (new uid), is another Event', async () => {
    const api = fakeApi();
    const events = recorder(api);
    events.record(pod, eventReasons.unschedulable, 'no node fits');
    events.record(pod, eventReasons.bindConflict, 'quota');
    events.record({ ...pod, uid: 'uid-2' }, eventReasons.unschedulable, 'no node fits');
    await vi.advanceTimersByTimeAsync(0);
    expect(api.events().map((e) => [e.reason, e.involvedObject.uid, e.count])).toEqual([
      ['VcudaUnschedulable', 'uid-1', 1],
      ['VcudaBindConflict', 'uid-1', 1],
      ['VcudaUnschedulable', 'uid-2', 1],
    ]);
    events.close();
  });

  it('an Event the API server let expire is created again with the count so far', async () => {
    const api = fakeApi();
    const events = recorder(api);
    events.record(pod, eventReasons.unschedulable, 'no node fits');
    await vi.advanceTimersByTimeAsync(0);
    api.stored.clear();
    vi.setSystemTime(START.getTime() + 90_000);
    events.record(pod, eventReasons.unschedulable, 'still no node fits');
    await vi.advanceTimersByTimeAsync(0);
    expect(api.events()).toMatchObject([{ count: 2, message: 'still no node fits' }]);
    events.close();
  });

  it('a failed write is reported, and the repeats it missed are written at the next chance', async () => {
    const api = fakeApi();
    const errors: unknown[] = [];
    let down = true;
    const events = recorder(
      {
        ...api,
        writer: {
          create: (ns, e) =>
            down ? Promise.reject(new VcudaError('unavailable', 'API server down')) : api.writer.create(ns, e),
          update: api.writer.update,
        },
      },
      errors,
    );
    events.record(pod, eventReasons.unschedulable, 'no node fits');
    await vi.advanceTimersByTimeAsync(0);
    expect(errors).toHaveLength(1);
    down = false;
    vi.setSystemTime(START.getTime() + 10_000);
    events.record(pod, eventReasons.unschedulable, 'no node fits');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(api.events()).toMatchObject([{ count: 2 }]);
    events.close();
  });

  it('remembers a bounded number of pods: a flood of distinct pods cannot grow it without limit', async () => {
    const api = fakeApi();
    const events = createEventRecorder({ writer: api.writer, component: 'c', clock: () => new Date(), maxTracked: 10 });
    for (let i = 0; i < 50; i++)
      events.record({ namespace: 'ns', name: `p-${i}`, uid: `u-${i}` }, 'VcudaUnschedulable', 'x');
    await vi.advanceTimersByTimeAsync(0);
    // The first pod was forgotten: its repeat is a new Event, not a count on the old one.
    events.record({ namespace: 'ns', name: 'p-0', uid: 'u-0' }, 'VcudaUnschedulable', 'x');
    await vi.advanceTimersByTimeAsync(0);
    expect(api.events().filter((e) => e.involvedObject.name === 'p-0')).toHaveLength(2);
    // The last one is still remembered: its repeat waits for the minute, as a count.
    events.record({ namespace: 'ns', name: 'p-49', uid: 'u-49' }, 'VcudaUnschedulable', 'x');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(api.events().filter((e) => e.involvedObject.name === 'p-49')).toMatchObject([{ count: 2 }]);
    events.close();
  });
});
