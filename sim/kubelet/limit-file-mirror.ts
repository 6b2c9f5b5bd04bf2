/**
 * A simulated container has no mount namespace, so paths *inside* files it reads cannot be
 * mounted into place. vcuda's limit file is the one such file: it names the accounting region by
 * its container path. The sim runtime gives the process a mirror of the limit file with that path
 * translated to the host, and re-mirrors it whenever the node agent changes the original (live
 * limit updates), writing in place so a reader that mapped it sees the change.
 *
 * The change is seen through inotify on the original's directory, as a runtime's file watch
 * would: the agent replaces the file by rename, so a watch on the file itself would stay on the
 * replaced inode, and a stat poll per container costs thousands of stats a second on a busy node.
 */
import { closeSync, existsSync, openSync, readFileSync, watch, writeSync } from 'node:fs';
import { basename, dirname } from 'node:path';
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
  const name = basename(source);
  const onChange = () => {
    try {
      mirrorOnce(source, target, translate);
    } catch {
      // A half-written original (odd seq, bad crc), or none between a removal and its
      // replacement, is retried on the next change.
    }
  };
  const watcher = watch(dirname(source), { persistent: false }, (_event, changed) => {
    if (changed === null || changed === name) onChange();
  });
  // The directory going away (the allocation's end) ends the watch; there is nothing left to follow.
  watcher.on('error', () => watcher.close());
  // Armed first, mirrored second: a change made in between is in the mirror or raises an event.
  try {
    mirrorOnce(source, target, translate);
  } catch (err) {
    watcher.close();
    throw err;
  }
  return { path: target, stop: () => watcher.close() };
}
