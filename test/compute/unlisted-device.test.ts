/**
 * Fail closed: a card the container's limit file does not list runs no work, on any submission
 * path. Its context is refused first (context overhead is memory, and its memory is refused);
 * the launch hooks refuse it too (CUDA_ERROR_INVALID_DEVICE) rather than fall back to the record
 * at the device's ordinal, which was another card's limits or none.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeLimitConfig } from '../../contract/limit-config.js';

const build = join(process.cwd(), 'native/build');
const FAKE_UUID = 'GPU-fa4e6770-0000-4000-8000-000000000000';
const dir = mkdtempSync(join(tmpdir(), 'vcuda-unlisted-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Two records, so the single-card fast path does not apply; `first` decides whether card 0 is listed. */
function writeConfig(name: string, first: string): string {
  const path = join(dir, `${name}.conf`);
  const device = (uuid: string, hostIndex: number) => ({
    uuid,
    hostIndex,
    mode: 'hard' as const,
    memoryLimitBytes: 2 ** 30,
    coreRequest: 50,
    coreLimit: 50,
  });
  writeFileSync(
    path,
    encodeLimitConfig({
      podUid: `pod-${name}`,
      containerName: 'c',
      regionPath: join(dir, `${name}.region`),
      writtenAtMs: Date.now(),
      devices: [device(first, 0), device('GPU-0f0f0f0f-0000-4000-8000-00000000000b', 1)],
    }),
  );
  return path;
}

function runClient(path: string, config: string) {
  return spawnSync(join(build, 'test/compute_client'), [path, '16', '0.2'], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      FAKEGPU_STATE: join(dir, 'fakegpu.state'),
      FAKEGPU_DEVICES: '1x81559',
      FAKEGPU_SMS: '16',
      LD_LIBRARY_PATH: join(build, 'fake'),
      LD_PRELOAD: join(build, 'libvcuda.so'),
      VCUDA_CONFIG: config,
    },
    encoding: 'utf8',
    timeout: 20_000,
  });
}

describe('a card the limit file does not list', () => {
  const unlisted = writeConfig('unlisted', 'GPU-0f0f0f0f-0000-4000-8000-00000000000a');
  const listed = writeConfig('listed', FAKE_UUID);

  it.each(['storm', 'ex', 'coop', 'graph', 'getproc'])('runs no %s work on it', (path) => {
    const r = runClient(path, unlisted);
    expect(r.status).toBe(2);
    expect(r.stdout).not.toMatch(/launches/);
    expect(r.stderr).toMatch(/device 0 \(GPU-fa4e6770-0000-4000-8000-000000000000\) is not in the limit file/);
  });

  it('accepts the same launches when the card is listed (the control)', () => {
    const r = runClient('storm', listed);
    expect(r.status).toBe(0);
    expect(Number(/launches (\d+)/.exec(r.stdout)?.[1])).toBeGreaterThan(0);
  });
});
