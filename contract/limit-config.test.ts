import { describe, expect, it } from 'vitest';
import {
  decodeLimitConfig,
  encodeLimitConfig,
  type LimitConfig,
  LimitConfigError,
  limitConfigSize,
  limitConfigOffsets as o,
} from './limit-config.js';

const config: LimitConfig = {
  podUid: '557729ca-6e83-4896-b567-a73d01ca0eba',
  containerName: 'model',
  regionPath: '/run/vcuda/region',
  writtenAtMs: 1_790_000_000_000,
  devices: [
    {
      uuid: 'GPU-11111111-2222-3333-4444-555555555555',
      hostIndex: 3,
      mode: 'soft',
      memoryLimitBytes: 8 * 2 ** 30,
      coreRequest: 30,
      coreLimit: 60,
      memoryBurstLimitBytes: 24 * 2 ** 30,
    },
    { uuid: 'GPU-aaaa', hostIndex: 0, mode: 'hard', memoryLimitBytes: 2 ** 40, coreRequest: 100, coreLimit: 100 },
  ],
};

describe('limit file layout', () => {
  it('pins every offset the native reader uses', () => {
    const buf = encodeLimitConfig(config, 42n);
    expect(buf.length).toBe(512 + 2 * 128);
    expect(buf.subarray(0, 8).toString('latin1')).toBe('VCUDACFG');
    expect(buf.readUInt32LE(8)).toBe(1);
    expect(buf.readUInt32LE(12)).toBe(512);
    expect(buf.readUInt32LE(16)).toBe(2);
    expect(buf.readUInt32LE(20)).toBe(128);
    expect(buf.readBigUInt64LE(24)).toBe(42n);
    expect(buf.readBigUInt64LE(32)).toBe(1_790_000_000_000n);
    expect(buf.subarray(48, 48 + 36).toString('latin1')).toBe(config.podUid);
    expect(buf[48 + 36]).toBe(0);
    expect(buf.subarray(112, 117).toString('latin1')).toBe('model');
    expect(buf.subarray(176, 176 + 17).toString('latin1')).toBe('/run/vcuda/region');
    const d0 = 512;
    expect(buf.subarray(d0, d0 + 40).toString('latin1')).toBe(config.devices[0]?.uuid);
    expect(buf.readUInt32LE(d0 + 48)).toBe(3);
    expect(buf.readUInt32LE(d0 + 52)).toBe(1); // soft
    expect(buf.readBigUInt64LE(d0 + 56)).toBe(8n * 2n ** 30n);
    expect(buf.readUInt32LE(d0 + 64)).toBe(30);
    expect(buf.readUInt32LE(d0 + 68)).toBe(60);
    expect(buf.readBigUInt64LE(d0 + 72)).toBe(24n * 2n ** 30n);
    const d1 = 512 + 128;
    expect(buf.readBigUInt64LE(d1 + 72)).toBe(0n); // no burst
    expect(buf.readUInt32LE(d1 + 52)).toBe(0); // hard
    expect(buf.readBigUInt64LE(d1 + 56)).toBe(2n ** 40n);
    expect(o.record.coreLimit).toBe(68);
  });

  it('round-trips', () => {
    expect(decodeLimitConfig(encodeLimitConfig(config, 4n))).toEqual({ ...config, seq: 4n });
  });

  it('reads a file written before the burst field as no burst', () => {
    const plain = { ...config, devices: [config.devices[1]!] };
    const decoded = decodeLimitConfig(encodeLimitConfig(plain));
    expect(decoded.devices[0]).not.toHaveProperty('memoryBurstLimitBytes');
  });

  it('allows zero devices', () => {
    const empty = { ...config, devices: [] };
    expect(encodeLimitConfig(empty).length).toBe(limitConfigSize(0));
  });

  it.each<[string, (b: Buffer) => Buffer | undefined]>([
    ['short file', (b) => b.subarray(0, 100)],
    ['bad magic', (b) => void b.write('XCUDACFG', 0, 'latin1')],
    ['future version', (b) => void b.writeUInt32LE(2, o.version)],
    ['wrong header size', (b) => void b.writeUInt32LE(256, o.headerSize)],
    ['wrong record size', (b) => void b.writeUInt32LE(64, o.recordSize)],
    ['too many devices', (b) => void b.writeUInt32LE(17, o.deviceCount)],
    ['truncated record', (b) => b.subarray(0, b.length - 1)],
    ['count disagrees with length', (b) => void b.writeUInt32LE(1, o.deviceCount)],
    ['write in progress', (b) => void b.writeBigUInt64LE(5n, o.seq)],
    ['flipped bit', (b) => void b.writeUInt8((b[512 + 60] ?? 0) ^ 1, 512 + 60)],
  ])('refuses a corrupt file: %s', (_name, corrupt) => {
    const buf = encodeLimitConfig(config);
    const damaged = corrupt(buf) ?? buf;
    expect(() => decodeLimitConfig(damaged)).toThrow(LimitConfigError);
  });

  it('ignores seq in the checksum so in-place seqlock updates stay valid', () => {
    const buf = encodeLimitConfig(config, 0n);
    buf.writeBigUInt64LE(1000n, o.seq);
    expect(decodeLimitConfig(buf).seq).toBe(1000n);
  });

  it.each<[string, Partial<LimitConfig['devices'][number]>]>([
    ['limit below request', { coreRequest: 50, coreLimit: 40, mode: 'hard' }],
    ['hard with limit above request', { coreRequest: 30, coreLimit: 60, mode: 'hard' }],
    ['zero memory', { memoryLimitBytes: 0 }],
    ['burst limit equal to the memory limit', { memoryBurstLimitBytes: 2 ** 40 }],
    ['burst limit below the memory limit', { memoryBurstLimitBytes: 2 ** 39 }],
    ['core above 100', { coreRequest: 101, coreLimit: 101 }],
    ['uuid too long', { uuid: `GPU-${'a'.repeat(60)}` }],
  ])('refuses to encode an invalid device: %s', (_name, patch) => {
    const bad = { ...config, devices: [{ ...config.devices[1]!, ...patch }] };
    expect(() => encodeLimitConfig(bad)).toThrow(/invalid/);
  });

  it('refuses a region path that does not fit', () => {
    expect(() => encodeLimitConfig({ ...config, regionPath: `/${'x'.repeat(300)}` })).toThrow(/regionPath/);
  });
});
