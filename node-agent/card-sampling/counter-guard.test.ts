import { describe, expect, it } from 'vitest';
import { createCounterGuard } from './counter-guard.js';

/** Ticks of 100 ms for `ms`, the counters growing at `countersPct` of each, NVML reading `devicePct`. */
function run(guard: ReturnType<typeof createCounterGuard>, ms: number, countersPct: number, devicePct: number) {
  const verdicts = [];
  for (let t = 0; t < ms; t += 100) {
    const v = guard.observe(100, countersPct * 1e6, devicePct * 100);
    if (v) verdicts.push(v);
  }
  return verdicts;
}

describe('createCounterGuard', () => {
  it('trusts counters that account for what NVML saw, within its usual over-read', () => {
    const guard = createCounterGuard();
    // A real H200 read a lone 30 % tenant at about 35 % in NVML.
    const verdicts = run(guard, 60_000, 30, 35);
    expect(verdicts).toHaveLength(6);
    expect(verdicts.every((v) => v.strikes === 0 && !v.distrusted)).toBe(true);
    expect(verdicts[0]).toMatchObject({ deviceBp: 3500, countersBp: 3000, unaccountedBp: 500 });
  });

  it('distrusts counters that stay far below NVML for three windows in a row, and for good', () => {
    const guard = createCounterGuard();
    // A tenant that writes its counter back to zero while its kernels keep the card 70 % busy.
    const verdicts = run(guard, 30_000, 0, 70);
    expect(verdicts.map((v) => [v.unaccountedBp, v.strikes, v.distrusted])).toEqual([
      [7000, 1, false],
      [7000, 2, false],
      [7000, 3, true],
    ]);
    // Honest again later: the card stays on NVML (a counter that lied once may lie again).
    expect(run(guard, 10_000, 70, 70)[0]).toMatchObject({ strikes: 0, distrusted: true });
  });

  it('forgives a window of under-count between good ones, and one just under the gap', () => {
    const guard = createCounterGuard();
    const verdicts = [
      ...run(guard, 20_000, 10, 40),
      ...run(guard, 10_000, 40, 40),
      ...run(guard, 20_000, 10, 40),
      ...run(guard, 30_000, 16, 40),
    ];
    expect(verdicts.map((v) => v.strikes)).toEqual([1, 2, 0, 1, 2, 0, 0, 0]);
    expect(verdicts.some((v) => v.distrusted)).toBe(false);
  });

  it('counts nothing against counters that read more than NVML (time-sliced tenants) or ticks NVML did not read', () => {
    const guard = createCounterGuard({ windowMs: 1_000, windows: 1 });
    expect(run(guard, 1_000, 130, 100)[0]).toMatchObject({ unaccountedBp: 0, distrusted: false });
    // No NVML reading: the tick adds neither time nor counts to the window.
    for (let i = 0; i < 50; i++) expect(guard.observe(100, 0, undefined)).toBeUndefined();
    expect(run(guard, 1_000, 50, 50)[0]).toMatchObject({ countersBp: 5000, deviceBp: 5000 });
  });
});
