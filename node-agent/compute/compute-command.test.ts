import { describe, expect, it } from 'vitest';
import { REGION_HEADER_SIZE, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { parseLimitChange } from './compute-command.js';
import { decodeDeviceComputeState } from './limiter-state.js';

describe('parseLimitChange', () => {
  it.each([
    ['0:core=30,limit=50', [0, { coreRequest: 30, coreLimit: 50 }]],
    ['2:limit=40,mode=hard', [2, { coreLimit: 40, mode: 'hard' }]],
  ])('%s', (spec, want) => {
    expect(parseLimitChange(spec)).toEqual(want);
  });

  it.each(['core=30', '0:', '0:core=abc', '0:memory=4GiB', '0:mode=fast'])('refuses %s', (spec) => {
    expect(() => parseLimitChange(spec)).toThrow(/--device/);
  });
});

describe('decodeDeviceComputeState', () => {
  it('reads the sample and the limiter fields at their offsets', () => {
    const region = Buffer.alloc(REGION_HEADER_SIZE + 2 * 256);
    const b = regionDeviceOffset(1);
    const l = b + regionOffsets.device.limiterState;
    region.writeBigUInt64LE(6n, b + regionOffsets.device.sampleSeq);
    region.writeUInt32LE(2990, b + regionOffsets.device.measuredShareBp);
    region.writeUInt32LE(9000, b + regionOffsets.device.cardBusyBp);
    region.writeBigUInt64LE(BigInt(120_000 * 256), l + 24);
    region.writeUInt32LE(3050, l + 72);
    region.writeUInt32LE(3000, l + 76);
    region.writeInt32LE(-50, l + 80);
    expect(decodeDeviceComputeState(region, 1)).toMatchObject({
      sampleSeq: 6,
      measuredShareBp: 2990,
      cardBusyBp: 9000,
      costNs: 120_001,
      rateBp: 3050,
      targetBp: 3000,
      trimBp: -50,
    });
  });
});
