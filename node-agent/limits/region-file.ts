/**
 * The container's accounting region on the host: created here with its header filled
 * (contract/region-layout.ts), grown and written by libvcuda, read here for metrics.
 */
import { closeSync, existsSync, openSync, readSync, writeFileSync } from 'node:fs';
import {
  REGION_DEVICE_BLOCK_SIZE,
  REGION_HEADER_SIZE,
  REGION_MAGIC,
  REGION_VERSION,
  regionDeviceOffset,
  regionOffsets,
} from '../../contract/index.js';

/** Process slots start at 8192; libvcuda grows the file past that as processes attach. */
export const REGION_INITIAL_BYTES = 8192;

export function encodeRegionHeader(deviceCount: number): Buffer {
  const buf = Buffer.alloc(REGION_INITIAL_BYTES);
  buf.write(REGION_MAGIC, regionOffsets.magic, 'latin1');
  buf.writeUInt32LE(REGION_VERSION, regionOffsets.version);
  buf.writeUInt32LE(REGION_HEADER_SIZE, regionOffsets.headerSize);
  buf.writeUInt32LE(deviceCount, regionOffsets.deviceCount);
  buf.writeUInt32LE(REGION_DEVICE_BLOCK_SIZE, regionOffsets.deviceBlockSize);
  return buf;
}

/** Creates the region once; an existing region belongs to running processes and is left alone. */
export function ensureRegionFile(path: string, deviceCount: number): boolean {
  if (existsSync(path)) return false;
  try {
    writeFileSync(path, encodeRegionHeader(deviceCount), { flag: 'wx', mode: 0o666 });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

export type RegionDeviceUsage = {
  /** Guaranteed bytes: ordinary device memory within the memory limit. */
  usedBytes: number;
  /** Managed bytes above the guarantee (vcuda-memory-limit), and of those the bytes on the host. */
  burstBytes: number;
  burstEvictedBytes: number;
  /** Evictions of burst bytes since the container started (where the driver reports them). */
  burstEvictions: number;
  measuredShareBp: number;
  cardBusyBp: number;
  /** When the compute sampler last wrote the shares (unix ms); 0 = never measured. */
  sampleTimeMs: number;
};

/** Reads each device block's counters; undefined when the file is missing or not a region. */
export function readRegionUsage(path: string, deviceCount: number): RegionDeviceUsage[] | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    // Missing (the container is gone or never started): no usage to read, which callers expect.
    return undefined;
  }
  try {
    const size = regionDeviceOffset(Math.max(0, deviceCount - 1)) + REGION_DEVICE_BLOCK_SIZE;
    const buf = Buffer.alloc(Math.max(size, REGION_HEADER_SIZE));
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (n < buf.length || buf.subarray(0, 8).toString('latin1') !== REGION_MAGIC) return undefined;
    const out: RegionDeviceUsage[] = [];
    for (let i = 0; i < deviceCount; i++) {
      const base = regionDeviceOffset(i);
      out.push({
        usedBytes: Number(buf.readBigUInt64LE(base + regionOffsets.device.usedBytes)),
        burstBytes: Number(buf.readBigUInt64LE(base + regionOffsets.device.burstBytes)),
        burstEvictedBytes: Number(buf.readBigUInt64LE(base + regionOffsets.device.burstEvictedBytes)),
        burstEvictions: Number(buf.readBigUInt64LE(base + regionOffsets.device.burstEvictions)),
        measuredShareBp: buf.readUInt32LE(base + regionOffsets.device.measuredShareBp),
        cardBusyBp: buf.readUInt32LE(base + regionOffsets.device.cardBusyBp),
        sampleTimeMs: Number(buf.readBigUInt64LE(base + regionOffsets.device.sampleTimeMs)),
      });
    }
    return out;
  } finally {
    closeSync(fd);
  }
}
