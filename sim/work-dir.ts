/**
 * The state directory of a local cluster: the one given, or a fresh temp dir owned by this
 * process, with the dirs of clusters whose process was killed cleaned up first.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const WORK_DIR_PREFIX = 'vcuda-local-';
const OWNER_FILE = 'owner.pid';
const SHM_DIR = '/dev/shm';
const TMPFS_MAGIC = 0x01021994;
const SHM_MIN_FREE_BYTES = 1024 ** 3;

/**
 * Where a fresh work dir goes. Most of a simulated node's state is what a real node keeps in
 * memory: `/run` (CDI specs, accounting regions, device state) and `/proc` are tmpfs and procfs
 * there. On a disk, creating a file costs 0.25 to 0.75 ms on a small VM (measured), which would
 * bill every simulated container start with I/O no node pays. So: a roomy tmpfs `/dev/shm` when
 * the machine has one (a container's default 64 MiB is not), the system temp dir otherwise.
 */
export function workDirParent(shmDir = SHM_DIR): string {
  try {
    const fs = statfsSync(shmDir);
    if (fs.type === TMPFS_MAGIC && fs.bavail * fs.bsize >= SHM_MIN_FREE_BYTES) return shmDir;
  } catch {
    // no /dev/shm here
  }
  return tmpdir();
}

/**
 * The cluster's state directory: the one given, or a fresh temp dir owned by this process (and
 * removed on close); work dirs that a killed process left behind go first.
 */
export function prepareWorkDir(given: string | undefined): { workDir: string; isOwn: boolean } {
  const isOwn = !given;
  const parent = workDirParent();
  if (isOwn) removeAbandonedWorkDirs(parent);
  const workDir = given ?? mkdtempSync(join(parent, WORK_DIR_PREFIX));
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

/** Whether a process with this id is running (one of another user's counts: it exists). */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
