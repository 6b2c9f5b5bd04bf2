import { describe, expect, it } from 'vitest';
import { measureOwnLag } from './lag-probe.js';

/** Keeps a few of the objects it makes, so young-generation collections have work and happen. */
function churn(megabytes: number): number {
  let kept: number[][] = [];
  let sum = 0;
  for (let i = 0; i < megabytes * 1024; i++) {
    const a = Array.from({ length: 32 }, (_, j) => i + j);
    sum += a[31] as number;
    if (i % 64 === 0) kept.push(a);
    if (kept.length > 256) kept = [];
  }
  return sum + kept.length;
}

describe('measureOwnLag', () => {
  it('counts the collector pauses of the measured span, young ones apart', async () => {
    const stop = measureOwnLag();
    // Well past one young generation (at most 16 MiB a semi-space by default on 64-bit Node 20).
    expect(churn(256)).toBeGreaterThan(0);
    // The observer hears of pauses asynchronously; stopping also takes the ones not yet delivered.
    const report = await stop();
    expect(report.gc.youngPauses).toBeGreaterThan(0);
    expect(report.gc.youngTotalMs).toBeGreaterThan(0);
    expect(report.gc.pauses).toBeGreaterThanOrEqual(report.gc.youngPauses);
    expect(report.gc.totalMs).toBeGreaterThanOrEqual(report.gc.youngTotalMs);
    expect(report.gc.maxMs).toBeGreaterThanOrEqual(report.gc.youngMaxMs);
    expect(report.gc.youngMaxMs).toBeLessThanOrEqual(report.gc.youngTotalMs);
  });

  it('counts nothing from before it started or after it stopped', async () => {
    churn(64);
    const stop = measureOwnLag();
    const reading = stop();
    churn(64);
    const report = await reading;
    expect(report.gc.pauses).toBe(0);
    expect(report.gc.totalMs).toBe(0);
  });
});
