/**
 * MIG partitioning through NVML (koffi): switch a card's MIG mode, list its GPU instances with
 * their compute instances, create a GPU instance at a placement and its whole compute instance,
 * destroy them. Discovery stays in nvml-mig.ts; this is what dynamic MIG (node-agent/mig/) acts
 * with. Struct offsets follow nvml.h: nvmlGpuInstancePlacement_t (start, size: 8 bytes),
 * nvmlGpuInstanceInfo_t (24 bytes on 64-bit: device @0, id @8, profileId @12, placement @16),
 * nvmlComputeInstanceProfileInfo_t (id @0, sliceCount @4; 36 bytes),
 * nvmlComputeInstanceInfo_t (device @0, gpuInstance @8, id @16, profileId @20, placement @24).
 */
import koffi from 'koffi';
import type { GpuInstanceState, MigControl } from './gpu-source.js';
import { type NvmlFn as Fn, NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED } from './nvml-codes.js';

type Check = (call: string, rc: number) => void;

/** NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7,8,6}_SLICE, by the compute slices they span. */
const COMPUTE_PROFILE_OF_SLICES: ReadonlyMap<number, number> = new Map([
  [1, 0],
  [2, 1],
  [3, 2],
  [4, 3],
  [7, 4],
  [8, 5],
  [6, 6],
]);
const COMPUTE_ENGINE_PROFILE_SHARED = 0;
const MAX_GPU_INSTANCES = 8;
const MAX_COMPUTE_INSTANCES = 8;

type ControlBindings = Record<
  | 'setMode'
  | 'createGi'
  | 'giById'
  | 'giInfo'
  | 'gis'
  | 'destroyGi'
  | 'ciProfileInfo'
  | 'createCi'
  | 'cis'
  | 'ciInfo'
  | 'destroyCi',
  Fn
>;

function bindControl(path: string): ControlBindings | null {
  const lib = koffi.load(path);
  try {
    return {
      setMode: lib.func('int nvmlDeviceSetMigMode(void *device, uint32 mode, _Out_ int *activation)'),
      createGi: lib.func(
        'int nvmlDeviceCreateGpuInstanceWithPlacement(void *device, uint32 profileId, uint8 *placement, _Out_ void **gi)',
      ),
      giById: lib.func('int nvmlDeviceGetGpuInstanceById(void *device, uint32 id, _Out_ void **gi)'),
      giInfo: lib.func('int nvmlGpuInstanceGetInfo(void *gi, _Out_ uint8 *info)'),
      gis: lib.func(
        'int nvmlDeviceGetGpuInstances(void *device, uint32 profileId, _Out_ void **out, _Inout_ uint32 *n)',
      ),
      destroyGi: lib.func('int nvmlGpuInstanceDestroy(void *gi)'),
      ciProfileInfo: lib.func(
        'int nvmlGpuInstanceGetComputeInstanceProfileInfo(void *gi, uint32 profile, uint32 eng, _Out_ uint8 *info)',
      ),
      createCi: lib.func('int nvmlGpuInstanceCreateComputeInstance(void *gi, uint32 profileId, _Out_ void **ci)'),
      cis: lib.func(
        'int nvmlGpuInstanceGetComputeInstances(void *gi, uint32 profileId, _Out_ void **out, _Inout_ uint32 *n)',
      ),
      ciInfo: lib.func('int nvmlComputeInstanceGetInfo_v2(void *ci, _Out_ uint8 *info)'),
      destroyCi: lib.func('int nvmlComputeInstanceDestroy(void *ci)'),
    };
  } catch {
    // A library without the MIG exports: nothing to partition.
    return null;
  }
}

function view(buf: Uint8Array): Buffer {
  return Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** The MigControl port over NVML; `handleOf` turns a card index into its NVML handle. */
export class NvmlMigControl implements MigControl {
  private constructor(
    private readonly nv: ControlBindings,
    private readonly handleOf: (card: number) => unknown,
    private readonly profileIds: (card: number) => readonly { profileId: number; computeSlices: number }[],
    private readonly check: Check,
  ) {}

  /** Binds the calls; undefined when the library has no MIG exports. */
  static bind(
    libraryPath: string,
    handleOf: (card: number) => unknown,
    profileIds: (card: number) => readonly { profileId: number; computeSlices: number }[],
    check: Check,
  ): NvmlMigControl | undefined {
    const nv = bindControl(libraryPath);
    return nv ? new NvmlMigControl(nv, handleOf, profileIds, check) : undefined;
  }

  setMigMode(card: number, on: boolean): void {
    const activation = [0];
    this.check('nvmlDeviceSetMigMode', this.nv.setMode(this.handleOf(card), on ? 1 : 0, activation) as number);
  }

  gpuInstances(card: number): GpuInstanceState[] {
    const out: GpuInstanceState[] = [];
    for (const p of this.profileIds(card)) {
      const handles: unknown[] = new Array(MAX_GPU_INSTANCES).fill(null);
      const n = [MAX_GPU_INSTANCES];
      const rc = this.nv.gis(this.handleOf(card), p.profileId, handles, n) as number;
      if (rc === NVML_ERROR_NOT_SUPPORTED) return []; // out of MIG mode: no instances
      this.check('nvmlDeviceGetGpuInstances', rc);
      for (const gi of handles.slice(0, n[0] ?? 0)) {
        const info = this.giInfoOf(gi);
        out.push({ ...info, computeInstanceIds: this.computeInstanceIds(gi, p.computeSlices) });
      }
    }
    return out.sort((a, b) => a.gpuInstanceId - b.gpuInstanceId);
  }

  createGpuInstance(card: number, profileId: number, start: number, size: number): number {
    const placement = new Uint8Array(8);
    view(placement).writeUInt32LE(start, 0);
    view(placement).writeUInt32LE(size, 4);
    const gi: unknown[] = [null];
    const rc = this.nv.createGi(this.handleOf(card), profileId, placement, gi) as number;
    this.check('nvmlDeviceCreateGpuInstanceWithPlacement', rc);
    return this.giInfoOf(gi[0]).gpuInstanceId;
  }

  createComputeInstance(card: number, gpuInstanceId: number): number {
    const gi = this.gi(card, gpuInstanceId);
    const ci: unknown[] = [null];
    this.check(
      'nvmlGpuInstanceCreateComputeInstance',
      this.nv.createCi(gi, this.wholeComputeProfile(card, gi), ci) as number,
    );
    const info = new Uint8Array(40);
    this.check('nvmlComputeInstanceGetInfo_v2', this.nv.ciInfo(ci[0], info) as number);
    return view(info).readUInt32LE(16);
  }

  destroyComputeInstance(card: number, gpuInstanceId: number, computeInstanceId: number): void {
    const gi = this.gi(card, gpuInstanceId);
    const ci = this.ciHandles(gi, this.wholeComputeProfile(card, gi)).find((h) => this.ciId(h) === computeInstanceId);
    if (ci === undefined) return; // already gone
    this.check('nvmlComputeInstanceDestroy', this.nv.destroyCi(ci) as number);
  }

  destroyGpuInstance(card: number, gpuInstanceId: number): void {
    const gi: unknown[] = [null];
    const rc = this.nv.giById(this.handleOf(card), gpuInstanceId, gi) as number;
    if (rc === NVML_ERROR_NOT_FOUND) return; // already gone
    this.check('nvmlDeviceGetGpuInstanceById', rc);
    this.check('nvmlGpuInstanceDestroy', this.nv.destroyGi(gi[0]) as number);
  }

  private gi(card: number, gpuInstanceId: number): unknown {
    const gi: unknown[] = [null];
    this.check('nvmlDeviceGetGpuInstanceById', this.nv.giById(this.handleOf(card), gpuInstanceId, gi) as number);
    return gi[0];
  }

  private giInfoOf(gi: unknown): Omit<GpuInstanceState, 'computeInstanceIds'> {
    const info = new Uint8Array(24);
    this.check('nvmlGpuInstanceGetInfo', this.nv.giInfo(gi, info) as number);
    const v = view(info);
    return {
      gpuInstanceId: v.readUInt32LE(8),
      profileId: v.readUInt32LE(12),
      start: v.readUInt32LE(16),
      size: v.readUInt32LE(20),
    };
  }

  /** The compute-instance profile that spans the whole GPU instance (the only kind vcuda makes). */
  private wholeComputeProfile(card: number, gi: unknown): number {
    const { profileId } = this.giInfoOf(gi);
    const p = this.profileIds(card).find((x) => x.profileId === profileId);
    if (!p) throw new RangeError(`card ${card} lists no GPU-instance profile ${profileId}`);
    return this.ciProfileId(gi, p.computeSlices);
  }

  private tryCiProfileId(gi: unknown, slices: number): number | undefined {
    const index = COMPUTE_PROFILE_OF_SLICES.get(slices);
    if (index === undefined) return undefined;
    const info = new Uint8Array(36);
    const rc = this.nv.ciProfileInfo(gi, index, COMPUTE_ENGINE_PROFILE_SHARED, info) as number;
    if (rc !== 0) return undefined;
    const v = view(info);
    return v.readUInt32LE(4) === slices && v.readUInt32LE(8) === 1 ? v.readUInt32LE(0) : undefined;
  }

  private ciProfileId(gi: unknown, slices: number): number {
    const id = this.tryCiProfileId(gi, slices);
    if (id === undefined)
      throw new RangeError(`GPU instance has no whole compute-instance profile of ${slices} slices`);
    return id;
  }

  private ciHandles(gi: unknown, profileId: number): unknown[] {
    const handles: unknown[] = new Array(MAX_COMPUTE_INSTANCES).fill(null);
    const n = [MAX_COMPUTE_INSTANCES];
    this.check('nvmlGpuInstanceGetComputeInstances', this.nv.cis(gi, profileId, handles, n) as number);
    return handles.slice(0, n[0] ?? 0);
  }

  private ciId(ci: unknown): number {
    const info = new Uint8Array(40);
    this.check('nvmlComputeInstanceGetInfo_v2', this.nv.ciInfo(ci, info) as number);
    return view(info).readUInt32LE(16);
  }

  private computeInstanceIds(gi: unknown, computeSlices: number): number[] {
    return this.ciHandles(gi, this.ciProfileId(gi, computeSlices)).map((h) => this.ciId(h));
  }
}
