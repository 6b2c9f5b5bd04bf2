/**
 * Publishing into a container's shared region under a seqlock: seq made odd, payload written,
 * seq made even. Each store is its own positioned write into the page cache libvcuda has mmapped,
 * so a reader never sees a payload without a surrounding odd/even change. Each block has one
 * writer (a card's sampler, the host-pid publisher), so the seq needs no compare-and-swap.
 */
import { closeSync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { VcudaError } from '../../contract/errors.js';
import { REGION_MAGIC } from '../../contract/region-layout.js';

/** A container's region that is shorter than its layout, or a write into it that fell short. */
export class RegionError extends VcudaError<'region-short' | 'region-write'> {}

function writeExactly(fd: number, buf: Buffer, position: number): void {
  const written = writeSync(fd, buf, 0, buf.length, position);
  if (written !== buf.length) throw new RegionError('region-write', `short write at ${position}`);
}

/** Writes `payload` at `payloadAt` under the seq at `seqAt`; returns the new (even) seq. */
export function publishSeqlocked(fd: number, seqAt: number, payloadAt: number, payload: Buffer, what: string): bigint {
  const seqBuf = Buffer.alloc(8);
  if (readSync(fd, seqBuf, 0, 8, seqAt) !== 8) throw new RegionError('region-short', `region has no ${what}`);
  let seq = seqBuf.readBigUInt64LE(0);
  // A writer that died mid-update left seq odd: the next write starts from the even below it.
  if (seq % 2n === 1n) seq -= 1n;
  seqBuf.writeBigUInt64LE(seq + 1n);
  writeExactly(fd, seqBuf, seqAt);
  writeExactly(fd, payload, payloadAt);
  seqBuf.writeBigUInt64LE(seq + 2n);
  writeExactly(fd, seqBuf, seqAt);
  return seq + 2n;
}

/** What runs one write on a region: `withRegion` below, or a `RegionHandles`' own. */
export type RegionAccess = (path: string, minSize: number, write: (fd: number) => void) => boolean;

/**
 * Opens the region at `path` for writing and checks its magic. Undefined when there is nothing
 * to write into: no file yet (no process of the container has started), or not a region.
 */
export function openRegion(path: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r+');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const magic = Buffer.alloc(8);
    if (readSync(fd, magic, 0, 8, 0) === 8 && magic.toString('latin1') === REGION_MAGIC) return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  closeSync(fd);
  return undefined;
}

/**
 * Runs `write` on the region at `path`, opened for this one write and closed after it. False
 * when there is nothing to write into: no file yet, not a region, or a region smaller than
 * `minSize` (the file is never grown here; libvcuda sizes it). Writers that come back every
 * period keep their regions open instead (region-handles.ts).
 */
export const withRegion: RegionAccess = (path, minSize, write) => {
  const fd = openRegion(path);
  if (fd === undefined) return false;
  try {
    if (fstatSync(fd).size < minSize) return false;
    write(fd);
    return true;
  } finally {
    closeSync(fd);
  }
};
