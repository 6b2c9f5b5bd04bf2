/**
 * Writes the node agent's measurement into a container's shared region (device block +64..+95,
 * contract/region-layout.ts) under its seqlock: seq made odd, fields written, seq made even.
 * Each store is its own positioned write into the page cache the library has mmapped, so a
 * reader never sees fields without a surrounding odd/even change. One writer per device block
 * (the card's sampler), so the seq needs no compare-and-swap.
 */
import { regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { publishSeqlocked, type RegionAccess, withRegion } from './region-seqlock.js';

export type ShareSample = {
  /** Unix ms at the end of the measured period. */
  timeMs: number;
  /** The container's share of the card's time, basis points (0..10000). */
  measuredShareBp: number;
  /** The whole card's busy share, basis points. */
  cardBusyBp: number;
  periodMs: number;
};

const FIELDS_START = regionOffsets.device.sampleTimeMs;
const FIELDS_BYTES = regionOffsets.device.limiterState - FIELDS_START;

function clampBp(value: number): number {
  return Math.max(0, Math.min(10_000, Math.round(value)));
}

/** The 24 bytes at +72..+95 of a device block for one sample (pure). */
export function encodeShareSample(sample: ShareSample): Buffer {
  const buf = Buffer.alloc(FIELDS_BYTES);
  const d = regionOffsets.device;
  buf.writeBigUInt64LE(BigInt(Math.max(0, Math.floor(sample.timeMs))), d.sampleTimeMs - FIELDS_START);
  buf.writeUInt32LE(clampBp(sample.measuredShareBp), d.measuredShareBp - FIELDS_START);
  buf.writeUInt32LE(clampBp(sample.cardBusyBp), d.cardBusyBp - FIELDS_START);
  buf.writeUInt32LE(Math.max(0, Math.min(0xffff_ffff, Math.round(sample.periodMs))), d.samplePeriodMs - FIELDS_START);
  return buf;
}

/** Publishes one sample into an open region file; returns the new (even) seq. */
export function writeShareSampleFd(fd: number, deviceIndex: number, sample: ShareSample): bigint {
  const block = regionDeviceOffset(deviceIndex);
  const seqAt = block + regionOffsets.device.sampleSeq;
  return publishSeqlocked(fd, seqAt, block + FIELDS_START, encodeShareSample(sample), `device block ${deviceIndex}`);
}

/**
 * Publishes one sample into the region file at `path`. Returns false when the region does not
 * exist yet or is not a region (no process of the container has started): nothing to steer.
 * `access` opens the region: for this one write by default, or through a writer's kept handles.
 */
export function writeShareSample(
  path: string,
  deviceIndex: number,
  sample: ShareSample,
  access: RegionAccess = withRegion,
): boolean {
  return access(path, 0, (fd) => void writeShareSampleFd(fd, deviceIndex, sample));
}
