import { describe, expect, it } from 'vitest';
import {
  REGION_FILE_SIZE,
  REGION_HEADER_SIZE,
  regionDeviceOffset,
  regionOffsets,
  regionPidMap,
} from './region-layout.js';

// The same numbers are pinned on the C side (native/src/region.h, native/test/pidns_test.c).
describe('region layout', () => {
  it('keeps the device blocks where libvcuda has them', () => {
    expect(REGION_HEADER_SIZE).toBe(4096);
    expect(regionDeviceOffset(0)).toBe(4096);
    expect(regionDeviceOffset(15)).toBe(4096 + 15 * 256);
    expect(() => regionDeviceOffset(16)).toThrow(/outside 0..15/);
    expect(regionOffsets.device).toEqual({
      usedBytes: 0,
      burstBytes: 8,
      burstEvictedBytes: 16,
      burstEvictions: 24,
      busyNs: 32,
      busySamples: 40,
      sampleSeq: 64,
      sampleTimeMs: 72,
      measuredShareBp: 80,
      cardBusyBp: 84,
      samplePeriodMs: 88,
      limiterState: 96,
    });
  });

  it('pins the host-pid map after the 4096 process slots', () => {
    expect(regionPidMap.offset).toBe(8192 + 256 * 4096);
    expect(regionPidMap.offset).toBe(1_056_768);
    expect(regionPidMap.header).toEqual({
      seq: 0,
      version: 8,
      entrySize: 12,
      publishedAtMs: 16,
      validForMs: 24,
      count: 28,
      flags: 32,
    });
    expect(regionPidMap.entry).toEqual({ hostPid: 0, containerPid: 4, startTicks: 8 });
    expect(regionPidMap.flags).toEqual({ ownPidNamespace: 1, truncated: 2 });
    expect(REGION_FILE_SIZE).toBe(1_126_400 + 256 * 4096);
  });

  it('header fields fit the header and entries fit their size', () => {
    const h = regionPidMap.header;
    expect(Math.max(h.seq + 8, h.publishedAtMs + 8, h.flags + 4)).toBeLessThanOrEqual(regionPidMap.headerSize);
    expect(regionPidMap.entry.startTicks + 8).toBe(regionPidMap.entrySize);
  });
});
