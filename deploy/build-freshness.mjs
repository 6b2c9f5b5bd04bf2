// Whether dist/ (`npm run build`) still matches a checkout's sources: the build writes
// dist/build-stamp.json with the folders it compiled and the time it started, and any file in
// them changed since (an edit, a pull, a checkout) makes it stale. Test files are not compiled,
// so they do not count. Used by bin/vcuda.js (run the build or the sources) and by the prepare
// script (skip a build that is still fresh); plain JavaScript, so neither needs a compiler.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const STAMP = 'build-stamp.json';

/** The stamp's content: what was compiled from where, and when the build started (ms). */
export function stampFor(sourceDirs, startedMs) {
  return { sourceDirs, startedMs };
}

function changedSince(dir, ms) {
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || entry.name.endsWith('.test.ts')) continue;
    if (statSync(join(entry.parentPath ?? entry.path, entry.name)).mtimeMs > ms) return true;
  }
  return false;
}

/** True when `dist` holds a build of `root`'s current sources (package.json included). */
export function buildIsFresh(root, dist = join(root, 'dist')) {
  const stampPath = join(dist, STAMP);
  if (!existsSync(stampPath)) return false;
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(stampPath, 'utf8'));
  } catch {
    return false;
  }
  if (!Array.isArray(stamp.sourceDirs) || typeof stamp.startedMs !== 'number') return false;
  if (statSync(join(root, 'package.json')).mtimeMs > stamp.startedMs) return false;
  return stamp.sourceDirs.every((d) => existsSync(join(root, d)) && !changedSince(join(root, d), stamp.startedMs));
}
