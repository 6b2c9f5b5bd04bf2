/**
 * Changes a running container's limits in place: the library maps the limit file and re-reads a
 * device's record whenever the seq at offset 24 changes, so the rewrite goes odd seq → header and
 * records with a fresh crc → even seq, each a positioned write into the mapped pages. The file
 * keeps its size and device order (the library indexes records by device), so only values change.
 */
import { closeSync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { fieldError, ValidationError } from '../../contract/errors.js';
import {
  type DeviceLimit,
  decodeLimitConfig,
  encodeLimitConfig,
  LimitConfigError,
  limitConfigOffsets,
} from '../../contract/limit-config.js';

export type DeviceLimitChange = Partial<Pick<DeviceLimit, 'mode' | 'coreRequest' | 'coreLimit' | 'memoryLimitBytes'>>;

function readWhole(fd: number): Buffer {
  const size = fstatSync(fd).size;
  const buf = Buffer.alloc(size);
  let at = 0;
  while (at < size) {
    const n = readSync(fd, buf, at, size - at, at);
    if (n === 0) break;
    at += n;
  }
  return buf.subarray(0, at);
}

/** Applies changes by device index to the devices of a config (pure). */
export function applyLimitChanges(
  devices: readonly DeviceLimit[],
  changes: ReadonlyMap<number, DeviceLimitChange>,
): DeviceLimit[] {
  const errors = [...changes.keys()]
    .filter((i) => !Number.isInteger(i) || i < 0 || i >= devices.length)
    .map((i) => fieldError(`devices[${i}]`, 'exists', `the config has ${devices.length} device(s)`));
  if (errors.length > 0) throw new ValidationError(errors, 'limit change');
  return devices.map((d, i) => {
    const change = changes.get(i);
    if (!change) return d;
    const next = { ...d, ...change };
    // Hard means request == limit: a hard change given only one of them moves both.
    if (change.mode === 'hard' || (next.mode === 'hard' && change.mode === undefined)) {
      const core = change.coreLimit ?? change.coreRequest ?? next.coreLimit;
      return { ...next, coreRequest: core, coreLimit: core };
    }
    return next;
  });
}

/**
 * Rewrites the limits of the config at `path` in place under its seqlock; returns the new seq.
 * Throws ValidationError for a change the schema refuses, LimitConfigError for a corrupt file.
 */
export function updateLimitsInPlace(
  path: string,
  changes: ReadonlyMap<number, DeviceLimitChange>,
  nowMs: number,
): bigint {
  const fd = openSync(path, 'r+');
  try {
    const current = readWhole(fd);
    const seqAt = limitConfigOffsets.seq;
    let seq = current.length >= seqAt + 8 ? current.readBigUInt64LE(seqAt) : 0n;
    // A writer that died between the odd and the even store: decode as if stable (the crc decides).
    if (seq % 2n === 1n) {
      seq -= 1n;
      current.writeBigUInt64LE(seq, seqAt);
    }
    const config = decodeLimitConfig(current);
    const devices = applyLimitChanges(config.devices, changes);
    const next = encodeLimitConfig(
      {
        podUid: config.podUid,
        containerName: config.containerName,
        regionPath: config.regionPath,
        writtenAtMs: nowMs,
        devices,
      },
      seq + 2n,
    );
    if (next.length !== current.length) throw new LimitConfigError('an in-place update cannot change the file size');
    const seqBuf = Buffer.alloc(8);
    seqBuf.writeBigUInt64LE(seq + 1n);
    writeSync(fd, seqBuf, 0, 8, seqAt);
    writeSync(fd, next, 0, seqAt, 0);
    writeSync(fd, next, seqAt + 8, next.length - seqAt - 8, seqAt + 8);
    seqBuf.writeBigUInt64LE(seq + 2n);
    writeSync(fd, seqBuf, 0, 8, seqAt);
    return seq + 2n;
  } finally {
    closeSync(fd);
  }
}
