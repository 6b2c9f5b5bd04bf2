import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCertificateKeeper, refreshEvery } from './certificate-keeper.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('createCertificateKeeper', () => {
  it('hands the listener the material only when a pass finds it changed', async () => {
    const loads = ['a', 'a', 'b', 'b'];
    const seen: (string | undefined)[] = [];
    const swapped: string[] = [];
    const keeper = createCertificateKeeper<string>({
      load: async (current) => {
        seen.push(current);
        return loads.shift() as string;
      },
      same: (x, y) => x === y,
      onChange: (m) => swapped.push(m),
    });
    for (let i = 0; i < 4; i++) await keeper.refresh();
    expect(swapped).toEqual(['a', 'b']);
    // Each load sees what the listener holds, to decide what is due.
    expect(seen).toEqual([undefined, 'a', 'a', 'b']);
  });

  it('keeps the listener on what it had when a pass fails', async () => {
    const swapped: string[] = [];
    let fail = false;
    const keeper = createCertificateKeeper<string>({
      load: async () => {
        if (fail) throw new Error('Secret unreadable');
        return 'a';
      },
      same: (x, y) => x === y,
      onChange: (m) => swapped.push(m),
    });
    await keeper.refresh();
    fail = true;
    await expect(keeper.refresh()).rejects.toThrow('Secret unreadable');
    expect(swapped).toEqual(['a']);
  });
});

describe('refreshEvery', () => {
  it('logs a failed pass, retries at the next tick, and stops when told', async () => {
    vi.useFakeTimers();
    const warnings: string[] = [];
    let passes = 0;
    const stop = refreshEvery(
      1_000,
      async () => {
        passes += 1;
        if (passes === 1) throw new Error('no');
      },
      { warn: (_o, msg) => warnings.push(msg) },
      'refresh failed; retrying later',
    );
    await vi.advanceTimersByTimeAsync(2_000);
    expect(passes).toBe(2);
    expect(warnings).toEqual(['refresh failed; retrying later']);
    stop();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(passes).toBe(2);
  });
});
