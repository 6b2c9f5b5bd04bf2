/**
 * The ledger `vcuda local` keeps between runs: embedded PGlite in a data directory (quotas set
 * with `vcuda quota set --data-dir DIR` while it is stopped, and the reports' history, survive a
 * restart), claimed by one run at a time, since two processes writing one PGlite directory would
 * corrupt it.
 */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { processExists } from './work-dir.js';

/** `$VCUDA_LOCAL_DATA_DIR`, else `~/.vcuda/local-ledger`. */
export function defaultLocalDataDir(env: Record<string, string | undefined> = process.env): string {
  return env['VCUDA_LOCAL_DATA_DIR'] || join(homedir(), '.vcuda', 'local-ledger');
}

const CLAIM_FILE = 'vcuda-local.pid';

/**
 * Claims `dir` for this process (a pid file created exclusively; one left by a process that is
 * gone is taken over) and returns its release. A directory another live run holds is refused.
 */
export function claimDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, CLAIM_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(file, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const holder = Number(readFileSync(file, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && processExists(holder)) {
        throw new Error(
          `the ledger directory ${dir} is in use by another vcuda local (pid ${holder}); stop it, or give this one --data-dir ANOTHER_DIR`,
        );
      }
      rmSync(file, { force: true });
    }
  }
  throw new Error(`could not claim the ledger directory ${dir}`);
}
