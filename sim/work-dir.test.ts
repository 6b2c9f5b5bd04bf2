import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { workDirParent } from './work-dir.js';

const TMPFS_MAGIC = 0x01021994;

function isRoomyTmpfs(dir: string): boolean {
  try {
    const fs = statfsSync(dir);
    return fs.type === TMPFS_MAGIC && fs.bavail * fs.bsize >= 1024 ** 3;
  } catch {
    return false;
  }
}

describe('workDirParent', () => {
  it('falls back to the system temp dir when there is no /dev/shm', () => {
    expect(workDirParent('/no/such/dir')).toBe(tmpdir());
  });

  it('refuses a directory that is not tmpfs', () => {
    const disk = mkdtempSync(join(process.cwd(), '.work-dir-test-'));
    try {
      if (isRoomyTmpfs(disk)) return; // a checkout on tmpfs has nothing to refuse
      expect(workDirParent(disk)).toBe(tmpdir());
    } finally {
      rmSync(disk, { recursive: true, force: true });
    }
  });

  it.runIf(isRoomyTmpfs('/dev/shm'))('takes a roomy tmpfs /dev/shm', () => {
    expect(workDirParent('/dev/shm')).toBe('/dev/shm');
  });
});
