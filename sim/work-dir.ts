/**
 * The state directory of a local cluster: the one given, or a fresh temp dir owned by this
 * process, with the dirs of clusters whose process was killed cleaned up first.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const WORK_DIR_PREFIX = 'vcuda-local-';
const OWNER_FILE = 'owner.pid';

/**
 * The cluster's state directory: the one given, or a fresh temp dir owned by this process (and
 * removed on close); work dirs that a killed process left behind go first.
 */
export function prepareWorkDir(given: string | undefined): { workDir: string; isOwn: boolean } {
  const isOwn = !given;
  if (isOwn) removeAbandonedWorkDirs(tmpdir());
  const workDir = given ?? mkdtempSync(join(tmpdir(), WORK_DIR_PREFIX));
  mkdirSync(workDir, { recursive: true });
  if (isOwn) writeFileSync(join(workDir, OWNER_FILE), String(process.pid));
  return { workDir, isOwn };
}

/**
 * Work directories of local clusters whose process is gone (killed with SIGKILL, so it could not
 * clean up): removed at the next start. A directory without an owner file is left alone.
 */
export function removeAbandonedWorkDirs(parent: string): void {
  for (const entry of readdirSync(parent)) {
    if (!entry.startsWith(WORK_DIR_PREFIX)) continue;
    const dir = join(parent, entry);
    let owner: number;
    try {
      owner = Number(readFileSync(join(dir, OWNER_FILE), 'utf8'));
    } catch {
      continue; // not ours to judge, or removed meanwhile
    }
    if (Number.isInteger(owner) && owner > 0 && !processExists(owner)) rmSync(dir, { recursive: true, force: true });
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
