/**
 * The container's limit file: written by the node agent, read by libvcuda.so (native/src/config.c).
 * Fixed little-endian layout, pinned by tests on both sides (contract/limit-config.test.ts and
 * native/test). The node agent changes limits of a running container in place under a seqlock:
 * `seq` odd while a write is in progress, even when stable; readers retry on odd or changed seq.
 *
 *  header (512 bytes)
 *    0   char[8]  magic "VCUDACFG"
 *    8   u32      version (1)
 *   12   u32      header size (512)
 *   16   u32      device count (0..16)
 *   20   u32      device record size (128)
 *   24   u64      seq (seqlock, even = stable)
 *   32   u64      written at (unix ms)
 *   40   u32      crc32 (IEEE) of the whole file with seq and crc zeroed
 *   44   u32      flags (0)
 *   48   char[64] pod UID, NUL padded
 *  112   char[64] container name, NUL padded
 *  176   char[256] region path: the container's shared accounting region file
 *  432   80 bytes reserved (0)
 *  device record i at 512 + 128·i
 *    0   char[48] card UUID ("GPU-…"), NUL padded
 *   48   u32      host index (NVML index on the node)
 *   52   u32      mode (0 hard, 1 soft)
 *   56   u64      memory limit (bytes)
 *   64   u32      core request (1..100, hundredths of the card)
 *   68   u32      core limit (1..100)
 *   72   u64      memory burst limit (bytes): the pod's vcuda-memory-limit; 0 = no burst. When set it
 *                 is above the memory limit, which stays the guarantee. Files written before the
 *                 field existed have 0 here, so they read as "no burst", exactly as before.
 *   80   48 bytes reserved (0)
 */
import { crc32 } from 'node:zlib';
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError, VcudaError } from './errors.js';

export const LIMIT_CONFIG_MAGIC = 'VCUDACFG';
export const LIMIT_CONFIG_VERSION = 1;
export const LIMIT_CONFIG_HEADER_SIZE = 512;
export const LIMIT_CONFIG_RECORD_SIZE = 128;
export const LIMIT_CONFIG_MAX_DEVICES = 16;

/** Byte offsets, exported so writers and tests name them instead of repeating numbers. */
export const limitConfigOffsets = {
  magic: 0,
  version: 8,
  headerSize: 12,
  deviceCount: 16,
  recordSize: 20,
  seq: 24,
  writtenAtMs: 32,
  crc32: 40,
  flags: 44,
  podUid: 48,
  containerName: 112,
  regionPath: 176,
  record: {
    uuid: 0,
    hostIndex: 48,
    mode: 52,
    memoryLimitBytes: 56,
    coreRequest: 64,
    coreLimit: 68,
    memoryBurstLimitBytes: 72,
  },
} as const;

const FIELD_BYTES = { podUid: 64, containerName: 64, regionPath: 256, uuid: 48 } as const;

const asciiFits = (max: number) =>
  z
    .string()
    .max(max - 1, `at most ${max - 1} bytes`)
    .regex(/^[\x20-\x7e]*$/, 'printable ASCII only');

export const deviceLimitSchema = z
  .object({
    uuid: asciiFits(FIELD_BYTES.uuid).min(1),
    hostIndex: z.number().int().min(0).max(0xffff_ffff),
    mode: z.enum(['hard', 'soft']),
    memoryLimitBytes: z.number().int().positive(),
    coreRequest: z.number().int().min(1).max(100),
    coreLimit: z.number().int().min(1).max(100),
    /** Burst ceiling above memoryLimitBytes (managed memory, evictable); absent: no burst. */
    memoryBurstLimitBytes: z.number().int().positive().optional(),
  })
  .refine((d) => d.memoryBurstLimitBytes === undefined || d.memoryBurstLimitBytes > d.memoryLimitBytes, {
    message: 'memoryBurstLimitBytes must be above memoryLimitBytes (leave it out for no burst)',
    path: ['memoryBurstLimitBytes'],
  })
  .refine((d) => d.coreLimit >= d.coreRequest, { message: 'coreLimit must be >= coreRequest', path: ['coreLimit'] })
  .refine((d) => (d.mode === 'hard') === (d.coreLimit === d.coreRequest), {
    message: 'mode is hard exactly when coreLimit equals coreRequest',
    path: ['mode'],
  });

export const limitConfigSchema = z.object({
  podUid: asciiFits(FIELD_BYTES.podUid),
  containerName: asciiFits(FIELD_BYTES.containerName),
  regionPath: asciiFits(FIELD_BYTES.regionPath).min(1),
  writtenAtMs: z.number().int().min(0),
  devices: z.array(deviceLimitSchema).max(LIMIT_CONFIG_MAX_DEVICES),
});

export type DeviceLimit = z.infer<typeof deviceLimitSchema>;
export type LimitConfig = z.infer<typeof limitConfigSchema>;

/** A limit file that cannot be trusted; read by the node agent and libvcuda only, never an HTTP answer. */
export class LimitConfigError extends VcudaError<'limit-config-corrupt'> {
  constructor(message: string) {
    super('limit-config-corrupt', message);
  }
}

export function limitConfigSize(deviceCount: number): number {
  return LIMIT_CONFIG_HEADER_SIZE + LIMIT_CONFIG_RECORD_SIZE * deviceCount;
}

function writeAscii(buf: Buffer, offset: number, text: string): void {
  buf.write(text, offset, 'latin1');
}

function readAscii(buf: Buffer, offset: number, length: number): string {
  const raw = buf.subarray(offset, offset + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString('latin1');
}

function checksum(buf: Buffer): number {
  const copy = Buffer.from(buf);
  copy.fill(0, limitConfigOffsets.seq, limitConfigOffsets.seq + 8);
  copy.fill(0, limitConfigOffsets.crc32, limitConfigOffsets.crc32 + 4);
  return crc32(copy);
}

/** Encodes a validated config; `seq` is the seqlock value to store (even). */
export function encodeLimitConfig(config: LimitConfig, seq = 0n): Buffer {
  const parsed = limitConfigSchema.safeParse(config);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'limit config');
  const c = parsed.data;
  const o = limitConfigOffsets;
  const buf = Buffer.alloc(limitConfigSize(c.devices.length));
  writeAscii(buf, o.magic, LIMIT_CONFIG_MAGIC);
  buf.writeUInt32LE(LIMIT_CONFIG_VERSION, o.version);
  buf.writeUInt32LE(LIMIT_CONFIG_HEADER_SIZE, o.headerSize);
  buf.writeUInt32LE(c.devices.length, o.deviceCount);
  buf.writeUInt32LE(LIMIT_CONFIG_RECORD_SIZE, o.recordSize);
  buf.writeBigUInt64LE(BigInt(c.writtenAtMs), o.writtenAtMs);
  writeAscii(buf, o.podUid, c.podUid);
  writeAscii(buf, o.containerName, c.containerName);
  writeAscii(buf, o.regionPath, c.regionPath);
  c.devices.forEach((d, i) => {
    const base = LIMIT_CONFIG_HEADER_SIZE + i * LIMIT_CONFIG_RECORD_SIZE;
    writeAscii(buf, base + o.record.uuid, d.uuid);
    buf.writeUInt32LE(d.hostIndex, base + o.record.hostIndex);
    buf.writeUInt32LE(d.mode === 'hard' ? 0 : 1, base + o.record.mode);
    buf.writeBigUInt64LE(BigInt(d.memoryLimitBytes), base + o.record.memoryLimitBytes);
    buf.writeUInt32LE(d.coreRequest, base + o.record.coreRequest);
    buf.writeUInt32LE(d.coreLimit, base + o.record.coreLimit);
    buf.writeBigUInt64LE(BigInt(d.memoryBurstLimitBytes ?? 0), base + o.record.memoryBurstLimitBytes);
  });
  buf.writeUInt32LE(checksum(buf), o.crc32);
  buf.writeBigUInt64LE(seq, o.seq);
  return buf;
}

/** Decodes and checks a config; every corruption is a LimitConfigError naming what is wrong. */
export function decodeLimitConfig(buf: Buffer): LimitConfig & { seq: bigint } {
  const o = limitConfigOffsets;
  if (buf.length < LIMIT_CONFIG_HEADER_SIZE) {
    throw new LimitConfigError(`file is ${buf.length} bytes, shorter than the ${LIMIT_CONFIG_HEADER_SIZE}-byte header`);
  }
  const magic = buf.subarray(0, 8).toString('latin1');
  if (magic !== LIMIT_CONFIG_MAGIC) throw new LimitConfigError(`bad magic ${JSON.stringify(magic)}`);
  const version = buf.readUInt32LE(o.version);
  if (version !== LIMIT_CONFIG_VERSION) throw new LimitConfigError(`unsupported version ${version}`);
  if (buf.readUInt32LE(o.headerSize) !== LIMIT_CONFIG_HEADER_SIZE) throw new LimitConfigError('bad header size');
  if (buf.readUInt32LE(o.recordSize) !== LIMIT_CONFIG_RECORD_SIZE) throw new LimitConfigError('bad record size');
  const count = buf.readUInt32LE(o.deviceCount);
  if (count > LIMIT_CONFIG_MAX_DEVICES) throw new LimitConfigError(`device count ${count} exceeds 16`);
  if (buf.length !== limitConfigSize(count)) {
    throw new LimitConfigError(`file is ${buf.length} bytes, expected ${limitConfigSize(count)} for ${count} devices`);
  }
  const seq = buf.readBigUInt64LE(o.seq);
  if (seq % 2n === 1n) throw new LimitConfigError('a write is in progress (odd seq)');
  const stored = buf.readUInt32LE(o.crc32);
  if (stored !== checksum(buf)) throw new LimitConfigError('checksum mismatch');
  const devices: DeviceLimit[] = [];
  for (let i = 0; i < count; i++) {
    const base = LIMIT_CONFIG_HEADER_SIZE + i * LIMIT_CONFIG_RECORD_SIZE;
    const burst = Number(buf.readBigUInt64LE(base + o.record.memoryBurstLimitBytes));
    devices.push({
      uuid: readAscii(buf, base + o.record.uuid, FIELD_BYTES.uuid),
      hostIndex: buf.readUInt32LE(base + o.record.hostIndex),
      mode: buf.readUInt32LE(base + o.record.mode) === 0 ? 'hard' : 'soft',
      memoryLimitBytes: Number(buf.readBigUInt64LE(base + o.record.memoryLimitBytes)),
      coreRequest: buf.readUInt32LE(base + o.record.coreRequest),
      coreLimit: buf.readUInt32LE(base + o.record.coreLimit),
      ...(burst === 0 ? {} : { memoryBurstLimitBytes: burst }),
    });
  }
  const config = {
    podUid: readAscii(buf, o.podUid, FIELD_BYTES.podUid),
    containerName: readAscii(buf, o.containerName, FIELD_BYTES.containerName),
    regionPath: readAscii(buf, o.regionPath, FIELD_BYTES.regionPath),
    writtenAtMs: Number(buf.readBigUInt64LE(o.writtenAtMs)),
    devices,
  };
  const parsed = limitConfigSchema.safeParse(config);
  if (!parsed.success) {
    throw new LimitConfigError(`invalid values: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
  }
  return { ...parsed.data, seq };
}
