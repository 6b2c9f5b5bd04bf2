import { describe, expect, it } from 'vitest';
import { type ContainerGrant, decodeLimitConfig, encodeLimitConfig, MIB } from '../../contract/index.js';
import { deviceLimitOf } from './grant-limits.js';

const grant = (memoryLimitBytes?: number): ContainerGrant => ({
  name: 'model',
  isInit: false,
  cards: [{ uuid: 'GPU-1', core: 30, memoryBytes: 1024 * MIB, ...(memoryLimitBytes ? { memoryLimitBytes } : {}) }],
  coreLimit: 30,
  mode: 'hard',
});

describe('deviceLimitOf: the burst ceiling reaches the limit file', () => {
  it('writes the signed ceiling as the record burst limit, the guarantee as its memory limit', () => {
    const g = grant(2048 * MIB);
    const limit = deviceLimitOf(g.cards[0]!, g, 3);
    expect(limit).toMatchObject({ memoryLimitBytes: 1024 * MIB, memoryBurstLimitBytes: 2048 * MIB });
    const file = encodeLimitConfig({
      podUid: 'u',
      containerName: 'model',
      regionPath: '/r',
      writtenAtMs: 0,
      devices: [limit],
    });
    expect(decodeLimitConfig(file).devices[0]?.memoryBurstLimitBytes).toBe(2048 * MIB);
  });

  it('writes no burst for an assignment without a ceiling, or one not above the guarantee', () => {
    for (const g of [grant(), grant(1024 * MIB)]) {
      expect(deviceLimitOf(g.cards[0]!, g, 0)).not.toHaveProperty('memoryBurstLimitBytes');
    }
  });
});
