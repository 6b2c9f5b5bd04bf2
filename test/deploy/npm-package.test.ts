/**
 * The npm package gives an admin a working `vcuda` without a checkout: `npm pack` ships the
 * compiled JavaScript and the command (no sources, no tests), and the installed command runs
 * from an unrelated directory without tsx or TypeScript: version, help, and a ledger command
 * that reads the migrations shipped beside the code. (Its speed is the `cli` benchmark's.)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type InstalledPackage,
  packAndInstall,
  packedFileList,
  productionDependencies,
} from '../support/npm-package.js';
import { repoRoot } from './manifests.js';

const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
  version: string;
  private?: boolean;
  bin: Record<string, string>;
  files: string[];
};
const npm = spawnSync('npm', ['--version'], { encoding: 'utf8' }).status === 0;

describe('package.json', () => {
  it('is publishable, with the vcuda command and only what it runs', () => {
    expect(pkg.private).toBeUndefined();
    expect(pkg.bin).toEqual({ vcuda: 'bin/vcuda.js' });
    expect(pkg.files).toEqual(['bin/vcuda.js', 'dist/']);
  });

  it('leaves development dependencies out of what an install pulls in', () => {
    const deps = productionDependencies(repoRoot);
    expect(deps).toContain('commander');
    expect(deps).not.toContain('tsx');
    expect(deps).not.toContain('typescript');
  });
});

describe.skipIf(!npm)(`npm pack and install${npm ? '' : ' (skipped: no npm)'}`, () => {
  let installed: InstalledPackage;
  const vcuda = (...args: string[]) =>
    execFileSync(installed.bin, args, {
      cwd: installed.cleanDir,
      encoding: 'utf8',
      env: { ...process.env, VCUDA_FROM_SOURCES: undefined, NODE_OPTIONS: undefined },
    });

  beforeAll(() => {
    installed = packAndInstall(repoRoot);
  }, 180_000);

  it('packs the command, the compiled code and its run-time files, never sources or tests', () => {
    const files = packedFileList(repoRoot);
    expect(files).toContain('bin/vcuda.js');
    expect(files).toContain('package.json');
    expect(files.filter((f) => !/^(bin\/vcuda\.js|package\.json|README\.md|dist\/.*)$/.test(f))).toEqual([]);
    const unpacked = (p: string) => existsSync(join(installed.packageDir, p));
    expect(unpacked('dist/cli/main.js')).toBe(true);
    expect(unpacked('dist/db/migrations/meta/_journal.json')).toBe(true);
    expect(unpacked('cli/main.ts')).toBe(false);
    expect(files.some((f) => /\.test\.|\/testing\/|\.ts$/.test(f))).toBe(false);
  });

  it('installs with npm itself where its cache holds the dependencies', () => {
    // Not a condition of the package working, so only said: `linked` means npm's cache lacked a dependency.
    console.info(`vcuda package installed by: ${installed.method}`);
    expect(existsSync(installed.bin)).toBe(true);
    expect(existsSync(join(installed.packageDir, 'package.json'))).toBe(true);
  });

  it('answers --version from a clean directory, running compiled JavaScript', () => {
    expect(vcuda('--version').trim()).toBe(pkg.version);
    expect(existsSync(join(installed.packageDir, 'node_modules/tsx'))).toBe(false);
  });

  it('lists the admin commands and runs one against a ledger', () => {
    const help = vcuda('--help');
    for (const command of ['quota', 'report', 'doctor', 'db'])
      expect(help).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    const ledger = join(installed.cleanDir, 'ledger');
    vcuda('db', 'migrate', '--data-dir', ledger);
    expect(existsSync(join(ledger, 'PG_VERSION'))).toBe(true);
  }, 60_000);
});
