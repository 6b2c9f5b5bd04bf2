import { describe, expect, it } from 'vitest';
import { eventReasons, podEvent } from '../../contract/index.js';
import { createRefusalLog, refusalFromEvent } from './refusal-log.js';

const now = new Date('2026-03-01T12:00:00.000Z');
const pod = { namespace: 'ml', name: 'train', uid: 'u1' };
const event = (reason: (typeof eventReasons)[keyof typeof eventReasons], at = now) =>
  podEvent(pod, reason, `refused because of ${reason}`, { component: 'vcuda', now: at, nameSuffix: 'x' });

describe('refusalFromEvent', () => {
  it.each([
    [eventReasons.admissionRefused, 'admission'],
    [eventReasons.quotaRefused, 'quota'],
    [eventReasons.unschedulable, 'scheduling'],
    [eventReasons.bindConflict, 'bind'],
    [eventReasons.allocateFailed, 'allocate'],
  ])('turns %s into a %s refusal', (reason, stage) => {
    expect(refusalFromEvent(event(reason), 'west')).toEqual({
      at: now.toISOString(),
      stage,
      cluster: 'west',
      namespace: 'ml',
      pod: 'train',
      reason,
      message: `refused because of ${reason}`,
    });
  });

  it.each([eventReasons.allocated, eventReasons.preempting, eventReasons.released])(
    'ignores %s: not a refusal',
    (reason) => {
      expect(refusalFromEvent(event(reason))).toBeUndefined();
    },
  );

  it('ignores events about other objects and events without a time', () => {
    const e = event(eventReasons.quotaRefused);
    expect(refusalFromEvent({ ...e, involvedObject: { ...e.involvedObject, kind: 'Node' } })).toBeUndefined();
    expect(
      refusalFromEvent({ ...e, lastTimestamp: null, firstTimestamp: null, eventTime: null, metadata: {} }),
    ).toBeUndefined();
  });

  it('accepts Date timestamps as the client library returns them', () => {
    const e = { ...event(eventReasons.unschedulable), lastTimestamp: now };
    expect(refusalFromEvent(e)?.at).toBe(now.toISOString());
  });
});

describe('createRefusalLog', () => {
  it('returns the newest first, bounded, and keeps one row per pod and reason', async () => {
    const log = createRefusalLog(3);
    for (let i = 0; i < 5; i++) {
      log.record({
        at: new Date(now.getTime() + i * 1000).toISOString(),
        stage: 'quota',
        namespace: 'ml',
        pod: `p${i}`,
        reason: eventReasons.quotaRefused,
        message: '',
      });
    }
    expect((await log.readRefusals(10)).map((r) => r.pod)).toEqual(['p4', 'p3', 'p2']);
    expect(log.recordEvent(event(eventReasons.quotaRefused, new Date(now.getTime() + 9000)))).toBe(true);
    expect(log.recordEvent(event(eventReasons.quotaRefused, new Date(now.getTime() + 10000)))).toBe(true);
    expect(log.recordEvent(event(eventReasons.allocated))).toBe(false);
    const rows = await log.readRefusals(2);
    expect(rows.map((r) => [r.pod, r.at])).toEqual([
      ['train', '2026-03-01T12:00:10.000Z'],
      ['p4', '2026-03-01T12:00:04.000Z'],
    ]);
  });
});
