/**
 * A simulated container has no mount namespace, so paths *inside* files it reads cannot be
 * mounted into place. vcuda's limit file is the one such file: it names the accounting region by
 * its container path. The sim runtime gives the process a mirror of the limit file with that path
 * translated to the host, and re-mirrors it whenever the node agent changes the original (live
 * limit updates), writing in place so a reader that mapped it sees the change.
 */
import { closeSync, existsSync, openSync, readFileSync, unwatchFile, watchFile, writeSync } from 'node:fs';
import { decodeLimitConfig, encodeLimitConfig, LIMIT_CONFIG_MAGIC } from '../../contract/index.js';

export type Mirror = { readonly path: string; stop(): void };

function isLimitFile(path: string): boolean {
  try {
    return existsSync(path) && readFileSync(path).subarray(0, 8).toString('latin1') === LIMIT_CONFIG_MAGIC;
  } catch {
    return false;
  }
}

function mirrorOnce(source: string, target: string, translate: (containerPath: string) => string): void {
  const decoded = decodeLimitConfig(readFileSync(source));
  const { seq, ...config } = decoded;
  const bytes = encodeLimitConfig({ ...config, regionPath: translate(config.regionPath) }, seq);
  const fd = openSync(target, existsSync(target) ? 'r+' : 'w');
  try {
    writeSync(fd, bytes, 0, bytes.length, 0);
  } finally {
    closeSync(fd);
  }
}

/** Starts mirroring `source` to `target`; undefined when `source` is not a limit file. */
export function mirrorLimitFile(
  source: string,
  target: string,
  translate: (containerPath: string) => string,
): Mirror | undefined {
  if (!isLimitFile(source)) return undefined;
  mirrorOnce(source, target, translate);
  const onChange = () => {
    try {
      mirrorOnce(source, target, translate);
    } catch {
      // A half-written original (odd seq, bad crc) is retried on the next change.
    }
  };
  watchFile(source, { interval: 200, persistent: false }, onChange);
  return { path: target, stop: () => unwatchFile(source, onChange) };
}
