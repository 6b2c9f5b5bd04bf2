import { describe, expect, it } from 'vitest';
import { fakeCards } from '../test/support/node-agent/fake-gpu-source.js';
import { CardHealth, isCriticalXid } from './health.js';

const IGNORED = [13, 31, 43, 45, 68, 109];

describe('card health', () => {
  it.each([
    [13, false],
    [31, false],
    [43, false],
    [48, true],
    [79, true],
    [999, true],
  ])('Xid %i critical: %s', (xid, critical) => {
    expect(isCriticalXid(xid, IGNORED)).toBe(critical);
  });

  it('marks only the card the event names, once, and tells listeners', () => {
    const h = new CardHealth(fakeCards({ cards: 2, memoryMiB: 10 }), IGNORED);
    let told = 0;
    h.subscribe(() => told++);
    expect(h.apply({ cardIndex: 1, kind: 'xid', xid: 13 })).toBe(false);
    expect(h.apply({ cardIndex: 1, kind: 'xid', xid: 79 })).toBe(true);
    expect(h.apply({ cardIndex: 1, kind: 'lost' })).toBe(false);
    expect(h.views().map((c) => c.healthy)).toEqual([true, false]);
    expect(told).toBe(1);
  });

  it('fails closed on an event it cannot attribute to a card', () => {
    const h = new CardHealth(fakeCards({ cards: 3, memoryMiB: 10 }), IGNORED);
    h.apply({ cardIndex: -1, kind: 'lost' });
    expect(h.views().every((c) => !c.healthy)).toBe(true);
  });
});
