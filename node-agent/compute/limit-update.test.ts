import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeLimitConfig, encodeLimitConfig, type LimitConfig } from '../../contract/limit-config.js';
import { applyLimitChanges, updateLimitsInPlace } from './limit-update.js';

const config: LimitConfig = {
  podUid: '7f3c2a1e-5b4d-4c3b-9a8f-0e1d2c3b4a59',
  containerName: 'trainer',
  regionPath: '/run/vcuda/regions/x',
  writtenAtMs: 1000,
  devices: [
    { uuid: 'GPU-aaaa', hostIndex: 0, mode: 'hard', memoryLimitBytes: 2 ** 30, coreRequest: 30, coreLimit: 30 },
    { uuid: 'GPU-bbbb', hostIndex: 3, mode: 'soft', memoryLimitBytes: 2 ** 31, coreRequest: 20, coreLimit: 60 },
  ],
};

function writeConfig(seq = 0n): string {
  const path = join(mkdtempSync(join(tmpdir(), 'vcuda-cfg-')), 'vcuda.conf');
  writeFileSync(path, encodeLimitConfig(config, seq));
  return path;
}

describe('updateLimitsInPlace', () => {
  it('rewrites one device, keeps the others, advances seq by 2 and stays decodable', () => {
    const path = writeConfig(4n);
    const seq = updateLimitsInPlace(path, new Map([[1, { coreRequest: 10, coreLimit: 90 }]]), 5000);
    expect(seq).toBe(6n);
    const back = decodeLimitConfig(readFileSync(path));
    expect(back.seq).toBe(6n);
    expect(back.writtenAtMs).toBe(5000);
    expect(back.devices[0]).toEqual(config.devices[0]);
    expect(back.devices[1]).toMatchObject({ uuid: 'GPU-bbbb', mode: 'soft', coreRequest: 10, coreLimit: 90 });
  });

  it('a hard device given a new limit moves request with it', () => {
    const path = writeConfig();
    updateLimitsInPlace(path, new Map([[0, { coreLimit: 70 }]]), 1);
    expect(decodeLimitConfig(readFileSync(path)).devices[0]).toMatchObject({ coreRequest: 70, coreLimit: 70 });
  });

  it('refuses a change the contract forbids, naming the field, and leaves the file as it was', () => {
    const path = writeConfig(2n);
    const before = readFileSync(path);
    expect(() => updateLimitsInPlace(path, new Map([[1, { coreRequest: 80, coreLimit: 40 }]]), 1)).toThrow(/coreLimit/);
    expect(() => updateLimitsInPlace(path, new Map([[5, { coreLimit: 40 }]]), 1)).toThrow(/devices\[5\]/);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('recovers a file left with an odd seq by a writer that died', () => {
    const path = writeConfig(8n);
    const buf = readFileSync(path);
    buf.writeBigUInt64LE(9n, 24);
    writeFileSync(path, buf);
    expect(updateLimitsInPlace(path, new Map([[0, { coreLimit: 50 }]]), 1)).toBe(10n);
  });

  it('refuses a corrupt file', () => {
    const path = writeConfig();
    const buf = readFileSync(path);
    buf[600] = (buf[600] ?? 0) ^ 0xff;
    writeFileSync(path, buf);
    expect(() => updateLimitsInPlace(path, new Map([[0, { coreLimit: 50 }]]), 1)).toThrow(/checksum/);
  });
});

describe('applyLimitChanges', () => {
  it('switches a device from soft to hard', () => {
    const [, b] = applyLimitChanges(config.devices, new Map([[1, { mode: 'hard', coreLimit: 40 }]]));
    expect(b).toMatchObject({ mode: 'hard', coreRequest: 40, coreLimit: 40 });
  });
});
