import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeLimitConfig, encodeLimitConfig, limitConfigOffsets } from '../../contract/index.js';
import { type Mirror, mirrorLimitFile } from './limit-file-mirror.js';

const GiB = 2 ** 30;
const config = (memoryLimitBytes: number) =>
  encodeLimitConfig({
    podUid: 'pod-1',
    containerName: 'main',
    regionPath: '/run/vcuda/region',
    writtenAtMs: 1,
    devices: [{ uuid: 'GPU-1', hostIndex: 0, mode: 'hard', memoryLimitBytes, coreRequest: 50, coreLimit: 50 }],
  });

/** As the node agent writes it: a temporary file renamed over the original. */
function replace(source: string, bytes: Buffer): void {
  writeFileSync(`${source}.tmp`, bytes);
  renameSync(`${source}.tmp`, source);
}

const limitOf = (path: string) => decodeLimitConfig(readFileSync(path)).devices[0]?.memoryLimitBytes;

const mirrors: Mirror[] = [];
afterEach(() => {
  for (const m of mirrors.splice(0)) m.stop();
});

function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-mirror-'));
  const etc = join(dir, 'etc');
  mkdirSync(etc);
  const source = join(etc, 'vcuda.conf');
  writeFileSync(source, config(1 * GiB));
  const mirror = mirrorLimitFile(source, join(dir, 'mirror'), (p) => p.replace('/run/vcuda', join(dir, 'run')))!;
  mirrors.push(mirror);
  return { dir, source, mirror };
}

describe('limit-file mirror', () => {
  it('mirrors at once with the region path translated, and follows rename-replacements of the original', async () => {
    const { dir, source, mirror } = setUp();
    expect(decodeLimitConfig(readFileSync(mirror.path)).regionPath).toBe(join(dir, 'run', 'region'));
    expect(limitOf(mirror.path)).toBe(1 * GiB);
    replace(source, config(2 * GiB));
    await expect.poll(() => limitOf(mirror.path)).toBe(2 * GiB);
    replace(source, config(3 * GiB));
    await expect.poll(() => limitOf(mirror.path)).toBe(3 * GiB);
  });

  it('keeps the last good copy over a half-written original and mirrors its next change', async () => {
    const { source, mirror } = setUp();
    const torn = config(4 * GiB);
    torn.writeBigUInt64LE(7n, limitConfigOffsets.seq); // odd seq: a writer is mid-update
    replace(source, torn);
    await new Promise((r) => setTimeout(r, 100));
    expect(limitOf(mirror.path)).toBe(1 * GiB);
    replace(source, config(5 * GiB));
    await expect.poll(() => limitOf(mirror.path)).toBe(5 * GiB);
  });

  it('stops following the original once stopped, and survives its directory going away', async () => {
    const { dir, source, mirror } = setUp();
    mirror.stop();
    replace(source, config(6 * GiB));
    await new Promise((r) => setTimeout(r, 100));
    expect(limitOf(mirror.path)).toBe(1 * GiB);
    const second = setUp();
    rmSync(join(second.dir, 'etc'), { recursive: true, force: true });
    await new Promise((r) => setTimeout(r, 100));
    expect(limitOf(second.mirror.path)).toBe(1 * GiB);
    rmSync(dir, { recursive: true, force: true });
    rmSync(second.dir, { recursive: true, force: true });
  });

  it('is no mirror for a file that is not a limit file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-mirror-'));
    writeFileSync(join(dir, 'other'), 'not a limit file');
    expect(mirrorLimitFile(join(dir, 'other'), join(dir, 'mirror'), (p) => p)).toBeUndefined();
    rmSync(dir, { recursive: true, force: true });
  });
});
