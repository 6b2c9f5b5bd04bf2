/**
 * When bin/vcuda.js may run dist/ instead of the sources (deploy/build-freshness.mjs): only while
 * every compiled source is as the build found it. A file that changed counts even when it came
 * back with a time older than the build (restored or copied with its times kept), which comparing
 * times against the build's start missed.
 */
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildIsFresh, STAMP, stampFor } from '../../deploy/build-freshness.mjs';

describe('build freshness', () => {
  let root: string;
  const file = (rel: string, text: string) => {
    mkdirSync(join(root, rel, '..'), { recursive: true });
    writeFileSync(join(root, rel), text);
  };
  /** What `npm run build` leaves: the stamp of the sources as they are now. */
  const build = () => {
    mkdirSync(join(root, 'dist'), { recursive: true });
    writeFileSync(join(root, 'dist', STAMP), JSON.stringify(stampFor(root, ['sim', 'cli'], Date.now())));
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'vcuda-freshness-'));
    file('package.json', '{}');
    file('sim/scheduler/dra-plugin.ts', 'export const a = 1;\n');
    file('sim/scheduler/dra-plugin.test.ts', 'test\n');
    file('sim/.vcuda/build/cuda-workload', 'binary');
    file('cli/main.ts', 'main\n');
    build();
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('is fresh as built, and stays so when only tests or build outputs in dot-folders change', () => {
    expect(buildIsFresh(root)).toBe(true);
    file('sim/scheduler/dra-plugin.test.ts', 'another test\n');
    file('sim/.vcuda/build/cuda-workload', 'rebuilt by make');
    expect(buildIsFresh(root)).toBe(true);
  });

  it('is stale once a source is edited, added or removed, or package.json changes', () => {
    file('sim/scheduler/dra-plugin.ts', 'export const a = 2;\n');
    expect(buildIsFresh(root)).toBe(false);
    build();
    file('sim/scheduler/dra-cache.ts', 'new\n');
    expect(buildIsFresh(root)).toBe(false);
    build();
    unlinkSync(join(root, 'sim/scheduler/dra-cache.ts'));
    expect(buildIsFresh(root)).toBe(false);
    build();
    file('package.json', '{"version":"2"}');
    expect(buildIsFresh(root)).toBe(false);
  });

  it('is stale when a source comes back changed with a time older than the build', () => {
    const before = new Date(Date.now() - 3_600_000);
    file('sim/scheduler/dra-plugin.ts', 'export const a = 22;\n');
    utimesSync(join(root, 'sim/scheduler/dra-plugin.ts'), before, before);
    expect(buildIsFresh(root)).toBe(false);
  });

  it('is stale without a stamp, with a broken one, or with one of an earlier release (no fingerprint)', () => {
    writeFileSync(join(root, 'dist', STAMP), JSON.stringify({ sourceDirs: ['sim', 'cli'], startedMs: Date.now() }));
    expect(buildIsFresh(root)).toBe(false);
    writeFileSync(join(root, 'dist', STAMP), '{');
    expect(buildIsFresh(root)).toBe(false);
    rmSync(join(root, 'dist', STAMP));
    expect(buildIsFresh(root)).toBe(false);
  });
});
