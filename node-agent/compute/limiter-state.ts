/**
 * Reads a device block of a container's region as the compute limiter and the sampler left it
 * (native/src/limiter.h `vc_limiter_state` at +96; the sample at +64..+95). For operators
 * (`vcuda compute show`), metrics and tests; read-only, so a torn read only costs one stale line.
 */
import { readFileSync } from 'node:fs';
import { REGION_MAX_DEVICES, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';

export type DeviceComputeState = {
  deviceIndex: number;
  /** Last node-agent sample. */
  sampleSeq: number;
  sampleTimeMs: number;
  measuredShareBp: number;
  cardBusyBp: number;
  samplePeriodMs: number;
  /** Limiter (native/src/limiter.h). */
  targetBp: number;
  rateBp: number;
  trimBp: number;
  costNs: number;
  tokensNs: number;
  waitedMs: number;
  samplesFolded: number;
};

/** Offsets inside `vc_limiter_state` (native/src/limiter.h), pinned by its layout. */
export const limiterOffsets = {
  tokens: 0,
  costQ8: 24,
  waited: 56,
  rate: 72,
  target: 76,
  trim: 80,
  samples: 84,
} as const;

export function decodeDeviceComputeState(region: Buffer, deviceIndex: number): DeviceComputeState {
  const b = regionDeviceOffset(deviceIndex);
  const d = regionOffsets.device;
  const l = b + d.limiterState;
  const q8 = region.readBigUInt64LE(l + limiterOffsets.costQ8);
  return {
    deviceIndex,
    sampleSeq: Number(region.readBigUInt64LE(b + d.sampleSeq)),
    sampleTimeMs: Number(region.readBigUInt64LE(b + d.sampleTimeMs)),
    measuredShareBp: region.readUInt32LE(b + d.measuredShareBp),
    cardBusyBp: region.readUInt32LE(b + d.cardBusyBp),
    samplePeriodMs: region.readUInt32LE(b + d.samplePeriodMs),
    targetBp: region.readUInt32LE(l + limiterOffsets.target),
    rateBp: region.readUInt32LE(l + limiterOffsets.rate),
    trimBp: region.readInt32LE(l + limiterOffsets.trim),
    costNs: q8 === 0n ? 0 : Number(q8 >> 8n) + 1,
    tokensNs: Number(region.readBigInt64LE(l + limiterOffsets.tokens)),
    waitedMs: Number(region.readBigUInt64LE(l + limiterOffsets.waited)) / 1e6,
    samplesFolded: region.readUInt32LE(l + limiterOffsets.samples),
  };
}

/** Every device block present in the region file at `path`. */
export function readComputeStates(path: string): DeviceComputeState[] {
  const region = readFileSync(path);
  const count = Math.min(region.readUInt32LE(regionOffsets.deviceCount), REGION_MAX_DEVICES);
  const out: DeviceComputeState[] = [];
  for (let i = 0; i < count && regionDeviceOffset(i) + 256 <= region.length; i++) {
    out.push(decodeDeviceComputeState(region, i));
  }
  return out;
}
