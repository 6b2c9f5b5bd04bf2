/**
 * Per-process utilization samples through NVML. `nvmlDeviceGetProcessesUtilizationInfo` (the
 * versioned call, NVML 12.x) is asked first: on Blackwell the older
 * `nvmlDeviceGetProcessUtilization` answers zeros (HAMi #2015). A driver without the new call
 * (FUNCTION_NOT_FOUND, or an absent export) or one that answers NOT_SUPPORTED is asked the old one.
 * Both answer NOT_SUPPORTED on a card in MIG mode: no samples then.
 */
import koffi from 'koffi';
import type { ProcessUtilizationSample } from './gpu-source.js';
import {
  type NvmlFn as Fn,
  NVML_ERROR_FUNCTION_NOT_FOUND,
  NVML_ERROR_INSUFFICIENT_SIZE,
  NVML_ERROR_NOT_FOUND,
  NVML_ERROR_NOT_SUPPORTED,
  NVML_SUCCESS,
} from './nvml-codes.js';

/** nvmlProcessUtilizationSample_t: pid u32 @0, timeStamp u64 @8, smUtil @16, memUtil @20; 32 bytes. */
const SAMPLE_SIZE = 32;
/** nvmlProcessUtilizationInfo_v1_t: timeStamp u64 @0, pid @8, smUtil @12, memUtil @16, …; 40 bytes. */
const INFO_SAMPLE_SIZE = 40;
/** nvmlProcessesUtilizationInfo_v1_t is 24 bytes: version word sizeof | 1 << 24. */
const PROCESSES_UTILIZATION_INFO_V1 = 0x0100_0018;

/** The koffi type of nvmlProcessesUtilizationInfo_v1_t, declared when this module loads. */
export const PROCESSES_UTILIZATION_INFO_TYPE = 'vcuda_nvmlProcessesUtilizationInfo_v1_t';
koffi.struct(PROCESSES_UTILIZATION_INFO_TYPE, {
  version: 'uint32',
  processSamplesCount: 'uint32',
  lastSeenTimeStamp: 'uint64',
  procUtilArray: 'void *',
});

/** One read with room for `capacity` samples (0: the size query): its code, count and rows. */
type Read = (capacity: number) => { rc: number; count: number; rows: ProcessUtilizationSample[] };

export type ProcessUtilizationCalls = {
  /** nvmlDeviceGetProcessesUtilizationInfo; null when the library lacks the export. */
  info: Fn | null;
  /** nvmlDeviceGetProcessUtilization. */
  legacy: Fn;
};

/** Which call answered, for tests and logs. */
export type SampleSourceName = 'processes-utilization-info' | 'process-utilization';

export function readProcessUtilization(
  calls: ProcessUtilizationCalls,
  device: unknown,
  sinceUs: number,
  check: (call: string, rc: number) => void,
): { source: SampleSourceName; samples: ProcessUtilizationSample[] } {
  if (calls.info) {
    const read = infoRead(calls.info, device, sinceUs);
    const first = read(0);
    if (first.rc !== NVML_ERROR_NOT_SUPPORTED && first.rc !== NVML_ERROR_FUNCTION_NOT_FOUND) {
      const samples = readGrowing('nvmlDeviceGetProcessesUtilizationInfo', read, first, check);
      return { source: 'processes-utilization-info', samples };
    }
  }
  const read = legacyRead(calls.legacy, device, sinceUs);
  return {
    source: 'process-utilization',
    samples: readGrowing('nvmlDeviceGetProcessUtilization', read, read(0), check),
  };
}

/**
 * Whether the card has per-process utilization at all: false when every call the library has
 * answers NOT_SUPPORTED (a card in MIG mode, a MIG device, boards without it). A size query only.
 */
export function processUtilizationSupported(calls: ProcessUtilizationCalls, device: unknown): boolean {
  if (calls.info) {
    const rc = infoRead(calls.info, device, 0)(0).rc;
    if (rc !== NVML_ERROR_NOT_SUPPORTED && rc !== NVML_ERROR_FUNCTION_NOT_FOUND) return true;
  }
  return legacyRead(calls.legacy, device, 0)(0).rc !== NVML_ERROR_NOT_SUPPORTED;
}

/**
 * Reads until the samples fit. A sampling period may end between the size query and the read:
 * leave room, and ask again with what the driver says it needs rather than fail the period.
 */
function readGrowing(
  call: string,
  read: Read,
  first: ReturnType<Read>,
  check: (call: string, rc: number) => void,
): ProcessUtilizationSample[] {
  const { rc, count } = first;
  // NOT_SUPPORTED (MIG mode, old boards): no samples, not an error to log every period.
  if (rc === NVML_ERROR_NOT_FOUND || rc === NVML_ERROR_NOT_SUPPORTED || (rc === NVML_SUCCESS && count === 0)) return [];
  if (rc !== NVML_SUCCESS && rc !== NVML_ERROR_INSUFFICIENT_SIZE) check(call, rc);
  let need = count;
  for (let attempt = 0; ; attempt++) {
    const r = read(need + 16);
    if (r.rc === NVML_ERROR_NOT_FOUND) return [];
    if (r.rc !== NVML_ERROR_INSUFFICIENT_SIZE || attempt === 3) {
      check(call, r.rc);
      return r.rows;
    }
    need = Math.max(r.count, need * 2);
  }
}

function legacyRead(fn: Fn, device: unknown, sinceUs: number): Read {
  return (capacity) => {
    const count = [capacity];
    const buf = capacity > 0 ? new Uint8Array(SAMPLE_SIZE * capacity) : null;
    const rc = fn(device, buf, count, BigInt(sinceUs)) as number;
    const n = Math.min(count[0] ?? 0, capacity);
    if (rc !== NVML_SUCCESS || !buf) return { rc, count: count[0] ?? 0, rows: [] };
    const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
    const rows = Array.from({ length: n }, (_, i) => {
      const o = i * SAMPLE_SIZE;
      return {
        pid: view.readUInt32LE(o),
        timestampUs: Number(view.readBigUInt64LE(o + 8)),
        smPercent: view.readUInt32LE(o + 16),
        memoryPercent: view.readUInt32LE(o + 20),
      };
    });
    return { rc, count: count[0] ?? 0, rows };
  };
}

function infoRead(fn: Fn, device: unknown, sinceUs: number): Read {
  return (capacity) => {
    const bytes = INFO_SAMPLE_SIZE * capacity;
    const array = capacity > 0 ? koffi.alloc('uint8', bytes) : null;
    try {
      const info = {
        version: PROCESSES_UTILIZATION_INFO_V1,
        processSamplesCount: capacity,
        lastSeenTimeStamp: BigInt(sinceUs),
        procUtilArray: array,
      };
      const rc = fn(device, info) as number;
      const count = info.processSamplesCount;
      if (rc !== NVML_SUCCESS || !array) return { rc, count, rows: [] };
      // Copied out before the array is freed.
      const view = Buffer.from(new Uint8Array(koffi.view(array, bytes)).slice());
      const rows = Array.from({ length: Math.min(count, capacity) }, (_, i) => {
        const o = i * INFO_SAMPLE_SIZE;
        return {
          pid: view.readUInt32LE(o + 8),
          timestampUs: Number(view.readBigUInt64LE(o)),
          smPercent: view.readUInt32LE(o + 12),
          memoryPercent: view.readUInt32LE(o + 16),
        };
      });
      return { rc, count, rows };
    } finally {
      if (array) koffi.free(array);
    }
  };
}
