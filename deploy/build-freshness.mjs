// Whether dist/ (`npm run build`) still matches a checkout's sources: the build writes
// dist/build-stamp.json with the folders it compiled, the time it started and a fingerprint of
// their files as it found them (each file's path, size and modification time, and package.json's),
// and any difference since (an edit, a pull, a checkout, a file added or removed) makes it stale.
// The fingerprint is compared, not the times against the build's start: a file that comes back
// with an older time (restored or copied with its times kept, `cp -p`, `tar`, `rsync -a`, or
// written under a clock behind the one that built) is a change all the same. Test files are not
// compiled, and dot-folders hold build outputs (sim/.vcuda: the workload programs `vcuda local`
// makes), so neither counts. Used by bin/vcuda.js (run the build or the sources) and by the
// prepare script (skip a build that is still fresh); plain JavaScript, so neither needs a compiler.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

export const STAMP = 'build-stamp.json';

function counts(rel) {
  return !rel.endsWith('.test.ts') && !rel.split(sep).some((part) => part.startsWith('.'));
}

/** The fingerprint of `root`'s sources in `sourceDirs` and its package.json, as they are now. */
export function sourcesFingerprint(root, sourceDirs) {
  const lines = [];
  const add = (path) => {
    const s = statSync(path);
    lines.push(`${relative(root, path)}\0${s.size}\0${s.mtimeMs}`);
  };
  add(join(root, 'package.json'));
  for (const d of sourceDirs) {
    const dir = join(root, d);
    if (!existsSync(dir)) {
      lines.push(`${d}\0missing`);
      continue;
    }
    for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
      const path = join(entry.parentPath ?? entry.path, entry.name);
      if (entry.isFile() && counts(relative(root, path))) add(path);
    }
  }
  return createHash('sha256').update(lines.sort().join('\n')).digest('hex');
}

/** The stamp's content: what was compiled from where, when the build started (ms), and the sources then. */
export function stampFor(root, sourceDirs, startedMs) {
  return { sourceDirs, startedMs, sources: sourcesFingerprint(root, sourceDirs) };
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
  if (!Array.isArray(stamp.sourceDirs) || typeof stamp.sources !== 'string') return false;
  return stamp.sources === sourcesFingerprint(root, stamp.sourceDirs);
}
