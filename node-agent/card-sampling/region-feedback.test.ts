import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REGION_MAGIC, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { encodeShareSample, writeShareSample } from './region-feedback.js';

function makeRegion(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'vcuda-region-')), 'region');
  const buf = Buffer.alloc(8192);
  buf.write(REGION_MAGIC, 0, 'latin1');
  writeFileSync(path, buf);
  return path;
}

describe('writeShareSample', () => {
  it('writes the fields at the pinned offsets and leaves seq even, advanced by 2', () => {
    const path = makeRegion();
    const sample = { timeMs: 1_700_000_000_123, measuredShareBp: 3012, cardBusyBp: 9500, periodMs: 100 };
    expect(writeShareSample(path, 2, sample)).toBe(true);
    expect(writeShareSample(path, 2, { ...sample, measuredShareBp: 2999 })).toBe(true);
    const buf = readFileSync(path);
    const d = regionOffsets.device;
    const block = regionDeviceOffset(2);
    expect(buf.readBigUInt64LE(block + d.sampleSeq)).toBe(4n);
    expect(buf.readBigUInt64LE(block + d.sampleTimeMs)).toBe(1_700_000_000_123n);
    expect(buf.readUInt32LE(block + d.measuredShareBp)).toBe(2999);
    expect(buf.readUInt32LE(block + d.cardBusyBp)).toBe(9500);
    expect(buf.readUInt32LE(block + d.samplePeriodMs)).toBe(100);
    // Neighbouring blocks and the limiter state are untouched.
    expect(buf.readBigUInt64LE(regionDeviceOffset(1) + d.sampleSeq)).toBe(0n);
    expect(buf.subarray(block + d.limiterState, block + 256).every((b) => b === 0)).toBe(true);
  });

  it('recovers from a writer that died with seq odd', () => {
    const path = makeRegion();
    const buf = readFileSync(path);
    buf.writeBigUInt64LE(7n, regionDeviceOffset(0) + regionOffsets.device.sampleSeq);
    writeFileSync(path, buf);
    writeShareSample(path, 0, { timeMs: 1, measuredShareBp: 1, cardBusyBp: 1, periodMs: 1 });
    expect(readFileSync(path).readBigUInt64LE(regionDeviceOffset(0) + regionOffsets.device.sampleSeq)).toBe(8n);
  });

  it('does nothing for a region that does not exist yet or is not a region', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-region-'));
    const sample = { timeMs: 1, measuredShareBp: 1, cardBusyBp: 1, periodMs: 1 };
    expect(writeShareSample(join(dir, 'absent'), 0, sample)).toBe(false);
    writeFileSync(join(dir, 'other'), Buffer.alloc(8192));
    expect(writeShareSample(join(dir, 'other'), 0, sample)).toBe(false);
  });

  it('clamps shares to 0..10000 basis points', () => {
    const buf = encodeShareSample({ timeMs: 5, measuredShareBp: 12_000, cardBusyBp: -3, periodMs: 100 });
    expect(buf.readUInt32LE(8)).toBe(10_000);
    expect(buf.readUInt32LE(12)).toBe(0);
  });
});
