import { describe, expect, it } from 'vitest';
import { CallGate } from './call-gate.js';

const later = () => {
  let open = () => {};
  const gate = new Promise<void>((r) => {
    open = r;
  });
  return { gate, open };
};

describe('CallGate', () => {
  it('runs at most maxInFlight at once, the rest in turn', async () => {
    const gate = new CallGate({ maxInFlight: 2, maxWaiting: 10, waitMs: 5000 });
    let running = 0;
    let most = 0;
    const hold = later();
    const calls = Array.from({ length: 6 }, () =>
      gate.run(async () => {
        running++;
        most = Math.max(most, running);
        await hold.gate;
        running--;
      }),
    );
    await new Promise((r) => setTimeout(r, 10));
    expect(running).toBe(2);
    hold.open();
    await Promise.all(calls);
    expect(most).toBe(2);
  });

  it('refuses, as unavailable, a call past the waiting bound or one that waits too long', async () => {
    const gate = new CallGate({ maxInFlight: 1, maxWaiting: 1, waitMs: 30 });
    const hold = later();
    const first = gate.run(() => hold.gate);
    const waits = gate.run(async () => 'late');
    await expect(gate.run(async () => 'third')).rejects.toMatchObject({ code: 'unavailable' });
    await expect(waits).rejects.toThrow(/no turn within 30 ms/);
    hold.open();
    await first;
    // The slots are whole again.
    expect(await gate.run(async () => 'again')).toBe('again');
  });
});
