import { describe, expect, it } from 'vitest';
import { eventReasons, podEvent } from '../../contract/index.js';
import { createPreemptionLog, preemptionFromEvent } from './preemption-log.js';

const now = new Date('2026-03-01T12:00:00.000Z');
const event = (pod: string, reason: string, message: string, at = now) =>
  podEvent({ namespace: 'ml', name: pod, uid: `uid-${pod}` }, reason as never, message, {
    component: 'vcuda',
    now: at,
    nameSuffix: 'x',
  });

describe('preemptionFromEvent', () => {
  it("turns vcuda's VcudaPreempting into the preemptor's row, naming victims and cards", () => {
    const message =
      'preempting lower-priority pods on gpu-node-0 for GPU-3: ml/low-6 (priority 0), ml/low-7 (priority 0)';
    expect(preemptionFromEvent(event('urgent', eventReasons.preempting, message), 'west')).toEqual({
      at: now.toISOString(),
      role: 'preemptor',
      cluster: 'west',
      namespace: 'ml',
      pod: 'urgent',
      reason: 'VcudaPreempting',
      message,
    });
  });

  it("turns kube-scheduler's Preempted into a victim's row", () => {
    const row = preemptionFromEvent(event('low-6', 'Preempted', 'Preempted by pod u1 on node gpu-node-0'));
    expect(row).toMatchObject({
      role: 'victim',
      pod: 'low-6',
      reason: 'Preempted',
      message: 'Preempted by pod u1 on node gpu-node-0',
    });
    expect(row?.cluster).toBeUndefined();
  });

  it('ignores other reasons, other objects and events without a time', () => {
    expect(preemptionFromEvent(event('p', eventReasons.allocated, 'allocated'))).toBeUndefined();
    expect(preemptionFromEvent(event('p', eventReasons.quotaRefused, 'no'))).toBeUndefined();
    const e = event('p', 'Preempted', 'by someone');
    expect(preemptionFromEvent({ ...e, involvedObject: { ...e.involvedObject, kind: 'Node' } })).toBeUndefined();
    expect(
      preemptionFromEvent({ ...e, lastTimestamp: null, firstTimestamp: null, eventTime: null, metadata: {} }),
    ).toBeUndefined();
  });
});

describe('createPreemptionLog', () => {
  it('keeps the newest first, bounded, one row per pod and reason', async () => {
    const log = createPreemptionLog(3);
    for (let i = 0; i < 5; i++) {
      expect(log.recordEvent(event(`low-${i}`, 'Preempted', 'by urgent', new Date(now.getTime() + i * 1000)))).toBe(
        true,
      );
    }
    expect(log.recordEvent(event('urgent', eventReasons.preempting, 'first', new Date(now.getTime() + 9000)))).toBe(
      true,
    );
    // The preemptor's Event seen again (recorded when written, then watched) is one row, the newer.
    expect(log.recordEvent(event('urgent', eventReasons.preempting, 'again', new Date(now.getTime() + 10000)))).toBe(
      true,
    );
    expect(log.recordEvent(event('urgent', eventReasons.allocated, 'allocated'))).toBe(false);
    const rows = await log.readPreemptions(10);
    expect(rows.map((r) => [r.pod, r.role, r.message])).toEqual([
      ['urgent', 'preemptor', 'again'],
      ['low-4', 'victim', 'by urgent'],
      ['low-3', 'victim', 'by urgent'],
    ]);
    expect(await log.readPreemptions(1)).toHaveLength(1);
  });
});
