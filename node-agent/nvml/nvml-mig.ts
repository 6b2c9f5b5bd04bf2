/**
 * MIG discovery through NVML (koffi): a card's MIG mode, the GPU-instance profiles it offers with
 * their legal placements on the 8 memory slices, and the MIG devices that exist (GPU instance,
 * compute instance, profile, placement, `MIG-` UUID, memory, SMs). Struct offsets follow nvml.h:
 * nvmlGpuInstanceProfileInfo_v2_t (152 bytes: id @4, sliceCount @12, instanceCount @16,
 * multiprocessorCount @20, memorySizeMB u64 @48, name char[96] @56), nvmlGpuInstancePlacement_t
 * (start, size: 8 bytes), nvmlGpuInstanceInfo_t (24 bytes: device @0, id @8, profileId @12,
 * placement @16). A library without the MIG exports, or a card that answers NOT_SUPPORTED, has no MIG.
 */
import koffi from 'koffi';
import type { CardMig, MigInstance, MigProfile } from './gpu-source.js';
import {
  type NvmlFn as Fn,
  NVML_ERROR_INVALID_ARGUMENT,
  NVML_ERROR_NOT_FOUND,
  NVML_ERROR_NOT_SUPPORTED,
} from './nvml-codes.js';

/** NVML_GPU_INSTANCE_PROFILE_COUNT: profile indexes run 0..0x11. */
const GPU_INSTANCE_PROFILE_COUNT = 0x12;
const PROFILE_INFO_V2_SIZE = 152;
const PROFILE_INFO_V2 = PROFILE_INFO_V2_SIZE | (2 << 24);
const MEMORY_SLICES = 8;

type Check = (call: string, rc: number) => void;

type MigBindings = Record<
  | 'mode'
  | 'profileInfo'
  | 'placements'
  | 'maxDevices'
  | 'deviceByIndex'
  | 'gpuInstanceId'
  | 'computeInstanceId'
  | 'gpuInstanceById'
  | 'gpuInstanceInfo'
  | 'uuid'
  | 'memory',
  Fn
>;

function bindMig(path: string): MigBindings | null {
  const lib = koffi.load(path);
  try {
    return {
      mode: lib.func('int nvmlDeviceGetMigMode(void *device, _Out_ uint32 *current, _Out_ uint32 *pending)'),
      profileInfo: lib.func('int nvmlDeviceGetGpuInstanceProfileInfoV(void *device, uint32 profile, uint8 *info)'),
      placements: lib.func(
        'int nvmlDeviceGetGpuInstancePossiblePlacements_v2(void *device, uint32 id, uint8 *out, _Inout_ uint32 *count)',
      ),
      maxDevices: lib.func('int nvmlDeviceGetMaxMigDeviceCount(void *device, _Out_ uint32 *count)'),
      deviceByIndex: lib.func('int nvmlDeviceGetMigDeviceHandleByIndex(void *device, uint32 index, _Out_ void **mig)'),
      gpuInstanceId: lib.func('int nvmlDeviceGetGpuInstanceId(void *device, _Out_ uint32 *id)'),
      computeInstanceId: lib.func('int nvmlDeviceGetComputeInstanceId(void *device, _Out_ uint32 *id)'),
      gpuInstanceById: lib.func('int nvmlDeviceGetGpuInstanceById(void *device, uint32 id, _Out_ void **gi)'),
      gpuInstanceInfo: lib.func('int nvmlGpuInstanceGetInfo(void *gi, _Out_ uint8 *info)'),
      uuid: lib.func('int nvmlDeviceGetUUID(void *device, _Out_ uint8 *buf, uint32 length)'),
      memory: lib.func('int nvmlDeviceGetMemoryInfo(void *device, _Out_ uint8 *memory)'),
    };
  } catch {
    // A library without the MIG exports (older drivers, stand-ins): no card has MIG.
    return null;
  }
}

function cString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return Buffer.from(buf.subarray(0, end === -1 ? buf.length : end)).toString('latin1');
}

function view(buf: Uint8Array): Buffer {
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
}

export class NvmlMig {
  private readonly nv: MigBindings | null;

  constructor(
    libraryPath: string,
    private readonly check: Check,
  ) {
    this.nv = bindMig(libraryPath);
  }

  /** true in MIG mode, false out of it, undefined when the card (or the library) has no MIG. */
  mode(card: unknown): boolean | undefined {
    if (!this.nv) return undefined;
    const current = [0];
    const pending = [0];
    const rc = this.nv.mode(card, current, pending) as number;
    if (rc === NVML_ERROR_NOT_SUPPORTED || rc === NVML_ERROR_INVALID_ARGUMENT) return undefined;
    this.check('nvmlDeviceGetMigMode', rc);
    return current[0] === 1;
  }

  /** The card's MIG layout now; null when it has no MIG. */
  layout(card: unknown): CardMig | null {
    const mode = this.mode(card);
    if (mode === undefined) return null;
    // Profiles and placements are listed out of MIG mode too (an H200 with driver 580 does).
    const profiles = this.profiles(card);
    if (!mode) return { mode: 'disabled', profiles, instances: [] };
    return { mode: 'enabled', profiles, instances: this.instances(card, profiles) };
  }

  private profiles(card: unknown): MigProfile[] {
    const nv = this.nv as MigBindings;
    const out: MigProfile[] = [];
    for (let index = 0; index < GPU_INSTANCE_PROFILE_COUNT; index++) {
      // A fresh struct, its version set, for every call: the driver refuses one passed again.
      const buf = new Uint8Array(PROFILE_INFO_V2_SIZE);
      const v = view(buf);
      v.writeUInt32LE(PROFILE_INFO_V2, 0);
      const rc = nv.profileInfo(card, index, buf) as number;
      if (rc === NVML_ERROR_NOT_SUPPORTED) continue; // not offered on this card
      if (rc === NVML_ERROR_INVALID_ARGUMENT) break; // past the last profile index
      this.check('nvmlDeviceGetGpuInstanceProfileInfoV', rc);
      const profileId = v.readUInt32LE(4);
      const placements = this.placements(card, profileId);
      out.push({
        profileId,
        profile: cString(buf.subarray(56)).replace(/^MIG /, ''),
        computeSlices: v.readUInt32LE(12),
        memorySlices: placements.size,
        maxInstances: v.readUInt32LE(16),
        sms: v.readUInt32LE(20),
        memoryMiB: Number(v.readBigUInt64LE(48)),
        placements: placements.starts,
      });
    }
    return out.sort((a, b) => a.profileId - b.profileId);
  }

  private placements(card: unknown, profileId: number): { starts: number[]; size: number } {
    const nv = this.nv as MigBindings;
    const count = [MEMORY_SLICES];
    const buf = new Uint8Array(8 * MEMORY_SLICES);
    this.check('nvmlDeviceGetGpuInstancePossiblePlacements_v2', nv.placements(card, profileId, buf, count) as number);
    const v = view(buf);
    const n = Math.min(count[0] ?? 0, MEMORY_SLICES);
    const starts = Array.from({ length: n }, (_, i) => v.readUInt32LE(i * 8));
    return { starts, size: n > 0 ? v.readUInt32LE(4) : 0 };
  }

  private instances(card: unknown, profiles: readonly MigProfile[]): MigInstance[] {
    const nv = this.nv as MigBindings;
    const max = [0];
    this.check('nvmlDeviceGetMaxMigDeviceCount', nv.maxDevices(card, max) as number);
    const out: MigInstance[] = [];
    for (let i = 0; i < (max[0] ?? 0); i++) {
      const mig: unknown[] = [null];
      const rc = nv.deviceByIndex(card, i, mig) as number;
      if (rc === NVML_ERROR_NOT_FOUND) continue;
      this.check('nvmlDeviceGetMigDeviceHandleByIndex', rc);
      out.push(this.instance(card, mig[0], profiles));
    }
    return out;
  }

  private instance(card: unknown, mig: unknown, profiles: readonly MigProfile[]): MigInstance {
    const nv = this.nv as MigBindings;
    const gi = [0];
    const ci = [0];
    this.check('nvmlDeviceGetGpuInstanceId', nv.gpuInstanceId(mig, gi) as number);
    this.check('nvmlDeviceGetComputeInstanceId', nv.computeInstanceId(mig, ci) as number);
    const handle: unknown[] = [null];
    this.check('nvmlDeviceGetGpuInstanceById', nv.gpuInstanceById(card, gi[0] ?? 0, handle) as number);
    const info = new Uint8Array(24);
    this.check('nvmlGpuInstanceGetInfo', nv.gpuInstanceInfo(handle[0], info) as number);
    const uuid = new Uint8Array(96);
    this.check('nvmlDeviceGetUUID', nv.uuid(mig, uuid, uuid.length) as number);
    const memory = new Uint8Array(24);
    this.check('nvmlDeviceGetMemoryInfo', nv.memory(mig, memory) as number);
    const v = view(info);
    const profileId = v.readUInt32LE(12);
    const profile = profiles.find((p) => p.profileId === profileId);
    return {
      uuid: cString(uuid),
      profile: profile?.profile ?? `profile-${profileId}`,
      profileId,
      gpuInstanceId: gi[0] ?? 0,
      computeInstanceId: ci[0] ?? 0,
      placement: { start: v.readUInt32LE(16), size: v.readUInt32LE(20) },
      memoryMiB: Math.floor(Number(view(memory).readBigUInt64LE(0)) / (1024 * 1024)),
      // The GPU instance's SMs: a whole-instance compute instance, the only kind vcuda makes.
      sms: profile?.sms ?? 0,
    };
  }
}
