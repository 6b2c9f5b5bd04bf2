import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeLimitConfig } from '../contract/limit-config.js';
import { parseDeviceSpec } from './config-command.js';

describe('parseDeviceSpec', () => {
  it('reads a full spec', () => {
    expect(parseDeviceSpec('0:memory=4GiB,core=30,limit=50,mode=soft,uuid=GPU-abc')).toEqual({
      uuid: 'GPU-abc',
      hostIndex: 0,
      mode: 'soft',
      memoryLimitBytes: 4 * 2 ** 30,
      coreRequest: 30,
      coreLimit: 50,
    });
  });

  it('reads memory-limit as the burst ceiling above the guaranteed memory', () => {
    expect(parseDeviceSpec('0:memory=1GiB,memory-limit=2GiB,uuid=GPU-a')).toMatchObject({
      memoryLimitBytes: 2 ** 30,
      memoryBurstLimitBytes: 2 * 2 ** 30,
    });
    expect(parseDeviceSpec('0:memory=1GiB,memory-limit=1GiB,uuid=GPU-a')).not.toHaveProperty('memoryBurstLimitBytes');
  });

  it('derives the mode from request and limit', () => {
    expect(parseDeviceSpec('1:memory=512MiB,core=30,uuid=GPU-a').mode).toBe('hard');
    expect(parseDeviceSpec('1:memory=512MiB,core=30,limit=60,uuid=GPU-a').mode).toBe('soft');
  });

  it.each([
    ['no index', 'memory=4GiB', /INDEX:/],
    ['no memory', '0:core=30', /memory must be a size/],
    ['bad memory', '0:memory=lots', /memory must be a size/],
    ['unknown key', '0:memory=1GiB,cores=3', /unknown key "cores"/],
    ['bad mode', '0:memory=1GiB,mode=turbo', /mode is hard or soft/],
    ['not key=value', '0:memory', /not key=value/],
    ['no uuid (it would match no card)', '0:memory=1GiB,core=30', /uuid=GPU-… is required/],
    [
      'core above a card',
      '0:memory=1GiB,core=150,uuid=GPU-a',
      /core must be a whole percent of the card, 1\.\.100, not "150"/,
    ],
    ['memory-limit below memory', '0:memory=2GiB,memory-limit=1GiB,uuid=GPU-a', /memory-limit 1GiB is below memory/],
    ['memory-limit not a size', '0:memory=1GiB,memory-limit=big,uuid=GPU-a', /memory-limit must be a size/],
    ['limit below core', '0:memory=1GiB,core=30,limit=20,uuid=GPU-a', /limit 20 is below core 30/],
  ])('refuses %s', (_name, spec, message) => {
    expect(() => parseDeviceSpec(spec)).toThrow(message);
  });
});

describe('vcuda config write / show', () => {
  it('writes a file the decoder reads back, and shows it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-config-'));
    const out = join(dir, 'vcuda.conf');
    const bin = join(process.cwd(), 'bin/vcuda.js');
    execFileSync(process.execPath, [
      bin,
      'config',
      'write',
      '--out',
      out,
      '--region',
      '/run/vcuda/region',
      '--device',
      '0:memory=4GiB,core=30,limit=50,mode=soft,uuid=GPU-aa',
      '--device',
      '1:memory=1GiB,core=100,uuid=GPU-bb',
    ]);
    const decoded = decodeLimitConfig(readFileSync(out));
    expect(decoded.devices.map((d) => [d.hostIndex, d.memoryLimitBytes, d.coreRequest, d.coreLimit, d.mode])).toEqual([
      [0, 4 * 2 ** 30, 30, 50, 'soft'],
      [1, 2 ** 30, 100, 100, 'hard'],
    ]);
    const shown = execFileSync(process.execPath, [bin, 'config', 'show', out]).toString();
    expect(shown).toContain('device 0 GPU-aa memory 4096 MiB core 30 limit 50 soft');
  });

  it('fails with a clear message on a corrupt file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-config-'));
    const out = join(dir, 'bad.conf');
    execFileSync('sh', ['-c', `printf 'not a config' > ${out}`]);
    let stderr = '';
    try {
      execFileSync(process.execPath, [join(process.cwd(), 'bin/vcuda.js'), 'config', 'show', out], { stdio: 'pipe' });
    } catch (err) {
      stderr = String((err as { stderr: Buffer }).stderr);
    }
    expect(stderr).toMatch(/^vcuda: file is 12 bytes, shorter than the 512-byte header\n$/);
  });
});
