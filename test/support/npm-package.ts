/**
 * The `vcuda` npm package as an admin gets it: `npm pack` of a staged copy of the package's files
 * (package.json, README.md, bin/vcuda.js and a fresh build in dist/: the checkout's when it is
 * fresh, else a new one, so the checkout's own dist/ is never touched), installed with
 * `npm install -g --prefix PREFIX` from npm's cache (offline: `npm ci` put every dependency
 * there). Where the cache lacks one, it is laid out as npm would (PREFIX/lib/node_modules/vcuda,
 * PREFIX/bin/vcuda linked to its bin) with its production dependencies linked from the checkout's
 * node_modules (package-lock.json says which: no development dependency, so no tsx). Test and
 * benchmark support only.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { buildIsFresh } from '../../deploy/build-freshness.mjs';

export type InstalledPackage = {
  /** The tarball `npm pack` wrote. */
  tarball: string;
  /** PREFIX/bin/vcuda: the command as PATH finds it after `npm install -g`. */
  bin: string;
  /** PREFIX/lib/node_modules/vcuda: the unpacked package. */
  packageDir: string;
  /** An empty directory outside the checkout, to run the command from. */
  cleanDir: string;
  /** `npm install` (from npm's cache, offline), or `linked` where the cache lacks a dependency. */
  method: 'npm install' | 'linked';
};

type Lock = { packages: Record<string, { dev?: boolean; devOptional?: boolean; optional?: boolean }> };

/** Top-level production dependencies the lockfile installs (names under node_modules/). */
export function productionDependencies(root: string): string[] {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as Lock;
  return Object.entries(lock.packages)
    .filter(([path, p]) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(path) && !p.dev && !p.devOptional)
    .map(([path]) => path.slice('node_modules/'.length));
}

/** The files `npm pack` of the checkout would put in the package (no scripts run, nothing built). */
export function packedFileList(root: string): string[] {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  return (JSON.parse(out) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path) ?? [];
}

/** Builds, packs and installs the package under a new temporary directory. */
export function packAndInstall(root: string): InstalledPackage {
  const work = mkdtempSync(join(tmpdir(), 'vcuda-npm-'));
  const stage = join(work, 'stage');
  mkdirSync(join(stage, 'bin'), { recursive: true });
  for (const f of ['package.json', 'README.md', 'bin/vcuda.js']) cpSync(join(root, f), join(stage, f));
  // The checkout's own build when it is fresh (as after `npm ci`), else a new one: same files.
  if (buildIsFresh(root)) cpSync(join(root, 'dist'), join(stage, 'dist'), { recursive: true });
  else {
    execFileSync(process.execPath, [join(root, 'deploy/build-dist.mjs'), '--out', join(stage, 'dist')], {
      stdio: 'pipe',
    });
  }
  const packed = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
    cwd: stage,
    encoding: 'utf8',
  });
  const tarball = join(work, (JSON.parse(packed) as { filename: string }[])[0]?.filename as string);

  const prefix = join(work, 'prefix');
  const packageDir = join(prefix, 'lib/node_modules/vcuda');
  const bin = join(prefix, 'bin/vcuda');
  // `npm install -g` itself, from npm's cache (which `npm ci` filled): no network, no scripts
  // (the admin commands need none). Without the packages in the cache, npm's layout by hand.
  const npmInstall = spawnSync(
    'npm',
    ['install', '-g', '--prefix', prefix, '--offline', '--ignore-scripts', '--no-audit', '--no-fund', tarball],
    { cwd: work, encoding: 'utf8', timeout: 180_000 },
  );
  const method = npmInstall.status === 0 ? 'npm install' : 'linked';
  if (method === 'linked') linkInstall(root, tarball, packageDir, bin);
  const cleanDir = join(work, 'elsewhere');
  mkdirSync(cleanDir);
  return { tarball, bin, packageDir, cleanDir, method };
}

/** npm's global layout by hand: the package unpacked, its production dependencies linked. */
function linkInstall(root: string, tarball: string, packageDir: string, bin: string): void {
  mkdirSync(packageDir, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', packageDir, '--strip-components=1']);
  for (const name of productionDependencies(root)) {
    const link = join(packageDir, 'node_modules', name);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, 'node_modules', name), link, 'dir');
  }
  mkdirSync(dirname(bin), { recursive: true });
  symlinkSync('../lib/node_modules/vcuda/bin/vcuda.js', bin);
}
