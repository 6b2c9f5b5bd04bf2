/**
 * The container's shared accounting region (one file per container, mmapped by every process of
 * the container through libvcuda.so and read/written by the node agent). native/src/region.c owns
 * the full layout and documents it in native/README.md; this file pins the parts other processes
 * touch: the header identity and, per device, the usage counter and the compute-feedback block.
 *
 *  header (4096 bytes)
 *    0   char[8] magic "VCUDAREG"
 *    8   u32     version (1)
 *   12   u32     header size (4096)
 *   16   u32     device count (config record order)
 *   20   u32     device block size (256)
 *  device block i at 4096 + 256·i (i < 16), all little-endian
 *    0   u64     used bytes on this device, all processes of the container (libvcuda): the
 *                guaranteed bytes, within the limit file's memory limit
 *    8   u64     burst bytes: managed memory above the guarantee (libvcuda, exact)
 *   16   u64     of those, bytes on the host (evicted), where the driver reports residency
 *   24   u64     evictions of burst bytes, where the driver reports them
 *   32   u64     busy ns: the container's GPU busy time on this device as libvcuda measures it
 *                in-process (timing events around sampled launches, native/COMPUTE.md "The
 *                in-process sensor"), all processes, only ever added to; 0 in older regions
 *   40   u64     busy samples: the timed launches behind it
 *   64   u64     sample seq (node agent; seqlock over bytes 72..95: odd while writing)
 *   72   u64     sample time (unix ms)
 *   80   u32     measured share: this container's share of the card's SM time, basis points
 *   84   u32     card busy: the whole card's busy time, basis points
 *   88   u32     sample period (ms)
 *   96..255      limiter state (native/src/limiter.c)
 *  process slots from 8192 (native/src/region.c): 4096 slots of 256 bytes
 *  host-pid map at 1056768 (node agent writes, libvcuda's NVML process lists read), little-endian
 *    0   u64     seq (seqlock over the map: odd while writing)
 *    8   u32     version (1; 0 = never written)
 *   12   u32     entry size (16)
 *   16   u64     published at (unix ms)
 *   24   u32     valid for (ms): stale once published at + valid for has passed
 *   28   u32     entry count (0..4096)
 *   32   u32     flags: 1 = the container has its own pid namespace, 2 = truncated
 *   64 + 16·j    entry j, sorted by host pid: host pid u32 @0, container pid u32 @4 (0 = unknown),
 *                start time u64 @8 (/proc/<pid>/stat field 22, clock ticks since boot)
 *  burst slots at 1126400 (the page after the map): slot k belongs to process slot k, burst bytes
 *  u64[16] @0 and evicted bytes u64[16] @128 per device (libvcuda only: what a dead process gives back)
 */
export const REGION_MAGIC = 'VCUDAREG';
export const REGION_VERSION = 1;
export const REGION_HEADER_SIZE = 4096;
export const REGION_DEVICE_BLOCK_SIZE = 256;
export const REGION_MAX_DEVICES = 16;

export const regionOffsets = {
  magic: 0,
  version: 8,
  headerSize: 12,
  deviceCount: 16,
  deviceBlockSize: 20,
  device: {
    usedBytes: 0,
    burstBytes: 8,
    burstEvictedBytes: 16,
    burstEvictions: 24,
    busyNs: 32,
    busySamples: 40,
    sampleSeq: 64,
    sampleTimeMs: 72,
    measuredShareBp: 80,
    cardBusyBp: 84,
    samplePeriodMs: 88,
    limiterState: 96,
  },
} as const;

export function regionDeviceOffset(deviceIndex: number): number {
  if (!Number.isInteger(deviceIndex) || deviceIndex < 0 || deviceIndex >= REGION_MAX_DEVICES) {
    throw new RangeError(`device index ${deviceIndex} outside 0..${REGION_MAX_DEVICES - 1}`);
  }
  return REGION_HEADER_SIZE + REGION_DEVICE_BLOCK_SIZE * deviceIndex;
}

export const REGION_SLOTS_OFFSET = 8192;
export const REGION_SLOT_SIZE = 256;
export const REGION_SLOT_CAPACITY = 4096;

/** The host-pid map: which host pids are the container's, and what the container calls them. */
export const regionPidMap = {
  offset: REGION_SLOTS_OFFSET + REGION_SLOT_SIZE * REGION_SLOT_CAPACITY,
  version: 1,
  headerSize: 64,
  entrySize: 16,
  capacity: 4096,
  header: { seq: 0, version: 8, entrySize: 12, publishedAtMs: 16, validForMs: 24, count: 28, flags: 32 },
  entry: { hostPid: 0, containerPid: 4, startTicks: 8 },
  flags: { ownPidNamespace: 1, truncated: 2 },
} as const;

const PID_MAP_END = regionPidMap.offset + regionPidMap.headerSize + regionPidMap.entrySize * regionPidMap.capacity;

/** Per process slot: its burst bytes per device, so a dead process's burst returns to the budget. */
export const regionBurstSlots = {
  offset: Math.ceil(PID_MAP_END / 4096) * 4096,
  slotSize: 256,
} as const;

/** Bytes libvcuda sizes the region file to (it is sparse: unused slots and entries cost nothing). */
export const REGION_FILE_SIZE = regionBurstSlots.offset + regionBurstSlots.slotSize * REGION_SLOT_CAPACITY;
