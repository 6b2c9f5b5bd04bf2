/**
 * GpuSource over NVML (`libnvidia-ml.so.1`, or the fake one from native/) through koffi.
 * Versioned export names are used as PROTOCOLS.md §5.1 says; struct layouts follow §5.5.
 * Every call's return code is checked and turned into an NvmlError naming the call.
 */

import type * as K from 'koffi';
import koffi from 'koffi';
import { VcudaError } from '../../contract/index.js';
import { pciKey, readConcurrentManagedAccess } from './cuda-managed-access.js';
import {
  type CardMig,
  type GpuCard,
  type GpuEvent,
  type GpuLink,
  type GpuSource,
  type MemoryUsage,
  type ProcessUtilizationSample,
  pcieLevelOf,
  type RunningProcess,
  type UtilizationRates,
} from './gpu-source.js';
import { readNumaNode } from './numa.js';
import {
  type NvmlFn as Fn,
  NVML_ERROR_GPU_IS_LOST,
  NVML_ERROR_INSUFFICIENT_SIZE,
  NVML_ERROR_INVALID_ARGUMENT,
  NVML_ERROR_NOT_FOUND,
  NVML_ERROR_NOT_SUPPORTED,
  NVML_ERROR_TIMEOUT,
  NVML_SUCCESS,
} from './nvml-codes.js';
import { NvmlMig } from './nvml-mig.js';
import { NvmlMigControl } from './nvml-mig-control.js';
import {
  PROCESSES_UTILIZATION_INFO_TYPE,
  processUtilizationSupported,
  readProcessUtilization,
  type SampleSourceName,
} from './process-utilization.js';

const EVENT_XID_CRITICAL = 0x8n;
/** `usedGpuMemory` when the driver cannot attribute memory to the process (NVML_VALUE_NOT_AVAILABLE). */
const NVML_VALUE_NOT_AVAILABLE = 0xffff_ffff_ffff_ffffn;
/** nvmlProcessInfo_t (PROTOCOLS.md §5.5): pid u32 @0, usedGpuMemory u64 @8, two u32 instance ids. */
const PROCESS_INFO_SIZE = 24;
const MAX_NVLINKS = 36;

export class NvmlError extends VcudaError<'nvml'> {
  constructor(
    readonly call: string,
    readonly nvmlCode: number,
    text: string,
  ) {
    super('nvml', `${call}: ${text} (nvmlReturn_t ${nvmlCode})`);
  }
}

const Memory = koffi.struct('vcuda_nvmlMemory_t', { total: 'uint64', free: 'uint64', used: 'uint64' });
const Utilization = koffi.struct('vcuda_nvmlUtilization_t', { gpu: 'uint32', memory: 'uint32' });
const ProcessSample = koffi.struct('vcuda_nvmlProcessUtilizationSample_t', {
  pid: 'uint32',
  timeStamp: 'uint64',
  smUtil: 'uint32',
  memUtil: 'uint32',
  encUtil: 'uint32',
  decUtil: 'uint32',
});
const EventData = koffi.struct('vcuda_nvmlEventData_t', {
  device: 'void *',
  eventType: 'uint64',
  eventData: 'uint64',
  gpuInstanceId: 'uint32',
  computeInstanceId: 'uint32',
});

type Bindings = {
  runningProcesses: Fn | null;
  processesUtilizationInfo: Fn | null;
  architecture: Fn | null;
  computeCapability: Fn | null;
  driverVersion: Fn | null;
} & Record<
  | 'init'
  | 'shutdown'
  | 'errorString'
  | 'count'
  | 'handleByIndex'
  | 'uuid'
  | 'name'
  | 'minor'
  | 'pciInfo'
  | 'memory'
  | 'utilization'
  | 'processUtilization'
  | 'commonAncestor'
  | 'nvLinkState'
  | 'eventSetCreate'
  | 'supportedEvents'
  | 'registerEvents'
  | 'eventSetWait'
  | 'eventSetFree',
  Fn
>;

function bind(path: string): Bindings {
  const lib = koffi.load(path);
  return {
    init: lib.func('int nvmlInit_v2()'),
    shutdown: lib.func('int nvmlShutdown()'),
    errorString: lib.func('const char *nvmlErrorString(int)'),
    count: lib.func('int nvmlDeviceGetCount_v2(_Out_ uint32 *count)'),
    handleByIndex: lib.func('int nvmlDeviceGetHandleByIndex_v2(uint32 index, _Out_ void **device)'),
    uuid: lib.func('int nvmlDeviceGetUUID(void *device, _Out_ uint8 *buf, uint32 length)'),
    name: lib.func('int nvmlDeviceGetName(void *device, _Out_ uint8 *buf, uint32 length)'),
    minor: lib.func('int nvmlDeviceGetMinorNumber(void *device, _Out_ uint32 *minor)'),
    // nvmlPciInfo_t is 68 bytes; busId (char[32]) sits at offset 36.
    pciInfo: lib.func('int nvmlDeviceGetPciInfo_v3(void *device, _Out_ uint8 *info)'),
    memory: lib.func('int nvmlDeviceGetMemoryInfo(void *device, _Out_ vcuda_nvmlMemory_t *memory)'),
    utilization: lib.func('int nvmlDeviceGetUtilizationRates(void *device, _Out_ vcuda_nvmlUtilization_t *u)'),
    processUtilization: lib.func(
      'int nvmlDeviceGetProcessUtilization(void *device, _Inout_ uint8 *samples, _Inout_ uint32 *count, uint64 since)',
    ),
    commonAncestor: lib.func('int nvmlDeviceGetTopologyCommonAncestor(void *a, void *b, _Out_ int *level)'),
    nvLinkState: lib.func('int nvmlDeviceGetNvLinkState(void *device, uint32 link, _Out_ int *state)'),
    eventSetCreate: lib.func('int nvmlEventSetCreate(_Out_ void **set)'),
    supportedEvents: lib.func('int nvmlDeviceGetSupportedEventTypes(void *device, _Out_ uint64 *mask)'),
    registerEvents: lib.func('int nvmlDeviceRegisterEvents(void *device, uint64 types, void *set)'),
    eventSetWait: lib.func('int nvmlEventSetWait_v2(void *set, _Out_ vcuda_nvmlEventData_t *data, uint32 timeoutMs)'),
    eventSetFree: lib.func('int nvmlEventSetFree(void *set)'),
    processesUtilizationInfo: optionalFunc(
      lib,
      `int nvmlDeviceGetProcessesUtilizationInfo(void *device, _Inout_ ${PROCESSES_UTILIZATION_INFO_TYPE} *info)`,
    ),
    runningProcesses: optionalFunc(
      lib,
      'int nvmlDeviceGetComputeRunningProcesses_v3(void *device, _Inout_ uint32 *count, _Inout_ uint8 *infos)',
    ),
    architecture: optionalFunc(lib, 'int nvmlDeviceGetArchitecture(void *device, _Out_ uint32 *arch)'),
    computeCapability: optionalFunc(
      lib,
      'int nvmlDeviceGetCudaComputeCapability(void *device, _Out_ int *major, _Out_ int *minor)',
    ),
    driverVersion: optionalFunc(lib, 'int nvmlSystemGetDriverVersion(_Out_ uint8 *buf, uint32 length)'),
  };
}

/** A binding for an export older drivers lack (the caller then answers "cannot tell"). */
function optionalFunc(lib: K.LibraryHandle, signature: string): Fn | null {
  try {
    return lib.func(signature);
  } catch {
    // The driver lacks the export: callers treat null as "cannot tell".
    return null;
  }
}

/** nvmlDeviceArchitecture_t → its name; undefined for a value this agent does not know. */
export function architectureName(code: number): string | undefined {
  const names: Record<number, string> = {
    2: 'Kepler',
    3: 'Maxwell',
    4: 'Pascal',
    5: 'Volta',
    6: 'Turing',
    7: 'Ampere',
    8: 'Ada',
    9: 'Hopper',
    10: 'Blackwell',
  };
  return names[code];
}

/** What the driver says of a card where its exports answer (for DRA attributes); nothing is guessed. */
function describeCard(nv: Bindings, h: unknown, driverVersion: string | undefined): Partial<GpuCard> {
  const out: Partial<GpuCard> = driverVersion ? { driverVersion } : {};
  const arch = [0];
  const name =
    nv.architecture && nv.architecture(h, arch) === NVML_SUCCESS ? architectureName(arch[0] ?? 0) : undefined;
  if (name) out.architecture = name;
  const major = [0];
  const minor = [0];
  if (nv.computeCapability && nv.computeCapability(h, major, minor) === NVML_SUCCESS) {
    out.computeCapability = `${major[0]}.${minor[0]}`;
  }
  return out;
}

function readDriverVersion(nv: Bindings): string | undefined {
  const buf = new Uint8Array(96);
  return nv.driverVersion && nv.driverVersion(buf, buf.length) === NVML_SUCCESS ? cString(buf) || undefined : undefined;
}

function cString(buf: Uint8Array): string {
  const end = buf.indexOf(0);
  return Buffer.from(buf.subarray(0, end === -1 ? buf.length : end)).toString('latin1');
}

export class NvmlGpuSource implements GpuSource {
  private readonly nv: Bindings;
  private readonly mig: NvmlMig;
  private readonly libraryPath: string;
  private readonly handles: unknown[] = [];
  private readonly cards: GpuCard[] = [];
  private eventSet: unknown;
  private closed = false;
  /** Which NVML call gave the last per-process samples (the versioned one first, the old one where it is missing). */
  lastSampleSource: SampleSourceName | undefined;

  /** Loads NVML, initialises it and reads every card once; throws NvmlError when the driver is unusable. */
  constructor(opts: {
    libraryPath: string;
    sysfsRoot: string;
    /** The CUDA driver library, asked once per card for concurrent managed access; absent: not asked. */
    cudaLibraryPath?: string;
  }) {
    const managed = opts.cudaLibraryPath
      ? readConcurrentManagedAccess(opts.cudaLibraryPath)
      : new Map<string, boolean>();
    this.nv = bind(opts.libraryPath);
    this.libraryPath = opts.libraryPath;
    this.mig = new NvmlMig(opts.libraryPath, (call, rc) => this.check(call, rc));
    this.check('nvmlInit_v2', this.nv.init());
    const count = [0];
    this.check('nvmlDeviceGetCount_v2', this.nv.count(count));
    const driverVersion = readDriverVersion(this.nv);
    for (let i = 0; i < (count[0] ?? 0); i++) {
      const out: unknown[] = [null];
      this.check(`nvmlDeviceGetHandleByIndex_v2(${i})`, this.nv.handleByIndex(i, out));
      const h = out[0];
      this.handles.push(h);
      const uuid = new Uint8Array(96);
      this.check('nvmlDeviceGetUUID', this.nv.uuid(h, uuid, uuid.length));
      const name = new Uint8Array(96);
      this.check('nvmlDeviceGetName', this.nv.name(h, name, name.length));
      const minor = [i];
      const minorRc = this.nv.minor(h, minor) as number;
      if (minorRc !== NVML_SUCCESS && minorRc !== NVML_ERROR_NOT_SUPPORTED) {
        this.check('nvmlDeviceGetMinorNumber', minorRc);
      }
      const pci = new Uint8Array(68);
      this.check('nvmlDeviceGetPciInfo_v3', this.nv.pciInfo(h, pci));
      const pciBusId = cString(pci.subarray(36, 68));
      const mem = { total: 0n, free: 0n, used: 0n };
      this.check('nvmlDeviceGetMemoryInfo', this.nv.memory(h, mem));
      const concurrentManagedAccess = managed.get(pciKey(pciBusId));
      const migMode = this.mig.mode(h);
      this.cards.push({
        index: i,
        uuid: cString(uuid),
        model: cString(name),
        memoryTotalBytes: Number(mem.total),
        pciBusId,
        minorNumber: minor[0] ?? i,
        numaNode: readNumaNode(pciBusId, opts.sysfsRoot),
        ...(concurrentManagedAccess === undefined ? {} : { concurrentManagedAccess }),
        ...(migMode === undefined ? {} : { migMode }),
        ...describeCard(this.nv, h, driverVersion),
      });
    }
    this.registerXidEvents();
  }

  private check(call: string, rc: unknown): void {
    if (rc === NVML_SUCCESS) return;
    const code = Number(rc);
    throw new NvmlError(call, code, String(this.nv.errorString(code) ?? 'unknown error'));
  }

  private handle(index: number): unknown {
    const h = this.handles[index];
    if (h === undefined) throw new RangeError(`no card with NVML index ${index}`);
    return h;
  }

  private registerXidEvents(): void {
    const out: unknown[] = [null];
    if (this.nv.eventSetCreate(out) !== NVML_SUCCESS) return;
    this.eventSet = out[0];
    for (const h of this.handles) {
      const mask = [0n];
      if (this.nv.supportedEvents(h, mask) !== NVML_SUCCESS) continue;
      if ((BigInt(mask[0] ?? 0n) & EVENT_XID_CRITICAL) === 0n) continue;
      // NOT_SUPPORTED leaves the set usable; other cards still report.
      this.nv.registerEvents(h, EVENT_XID_CRITICAL, this.eventSet);
    }
  }

  listCards(): GpuCard[] {
    return this.cards.map((c) => ({ ...c }));
  }

  link(a: number, b: number): GpuLink {
    if (a === b) return { nvlinks: 0, pcie: 'internal' };
    const ha = this.handle(a);
    const level = [50];
    const rc = this.nv.commonAncestor(ha, this.handle(b), level) as number;
    if (rc !== NVML_SUCCESS && rc !== NVML_ERROR_NOT_SUPPORTED) this.check('nvmlDeviceGetTopologyCommonAncestor', rc);
    // Counting active links of `a` is an upper bound for a↔b on switched (NVSwitch) systems, exact on
    // point-to-point ones; remote-PCI matching would refine it where the driver reports it.
    let nvlinks = 0;
    for (let link = 0; link < MAX_NVLINKS; link++) {
      const state = [0];
      const lrc = this.nv.nvLinkState(ha, link, state) as number;
      if (lrc === NVML_ERROR_INVALID_ARGUMENT || lrc === NVML_ERROR_NOT_SUPPORTED || lrc === NVML_ERROR_NOT_FOUND)
        break;
      if (lrc === NVML_SUCCESS && state[0] === 1) nvlinks++;
    }
    return { nvlinks, pcie: pcieLevelOf(level[0] ?? 50) };
  }

  memoryUsage(cardIndex: number): MemoryUsage {
    const mem = { total: 0n, free: 0n, used: 0n };
    this.check('nvmlDeviceGetMemoryInfo', this.nv.memory(this.handle(cardIndex), mem));
    return { totalBytes: Number(mem.total), usedBytes: Number(mem.used), freeBytes: Number(mem.free) };
  }

  waitEvent(timeoutMs: number): Promise<GpuEvent | undefined> {
    if (!this.eventSet || this.closed) {
      return new Promise((resolve) => setTimeout(() => resolve(undefined), timeoutMs));
    }
    const data = { device: null, eventType: 0n, eventData: 0n, gpuInstanceId: 0, computeInstanceId: 0 };
    return new Promise((resolve, reject) => {
      // Async: the wait blocks a koffi worker thread, never the event loop.
      this.nv.eventSetWait.async(this.eventSet, data, timeoutMs, (err: unknown, rc: number) => {
        if (err) return reject(err);
        if (rc === NVML_ERROR_TIMEOUT) return resolve(undefined);
        const cardIndex = this.handles.findIndex(
          (h) => koffi.address(h as never) === koffi.address(data.device as never),
        );
        if (rc === NVML_ERROR_GPU_IS_LOST) return resolve({ cardIndex: Math.max(cardIndex, 0), kind: 'lost' });
        if (rc !== NVML_SUCCESS)
          return reject(new NvmlError('nvmlEventSetWait_v2', rc, String(this.nv.errorString(rc))));
        resolve({ cardIndex, kind: 'xid', xid: Number(data.eventData) });
      });
    });
  }

  processUtilizationSupported(cardIndex: number): boolean {
    const calls = { info: this.nv.processesUtilizationInfo, legacy: this.nv.processUtilization };
    return processUtilizationSupported(calls, this.handle(cardIndex));
  }

  processUtilization(cardIndex: number, sinceUs: number): ProcessUtilizationSample[] {
    const calls = { info: this.nv.processesUtilizationInfo, legacy: this.nv.processUtilization };
    const read = readProcessUtilization(calls, this.handle(cardIndex), sinceUs, (call, rc) => this.check(call, rc));
    this.lastSampleSource = read.source;
    return read.samples;
  }

  migLayout(cardIndex: number): CardMig | null {
    return this.mig.layout(this.handle(cardIndex));
  }

  /** Whether the card is in MIG mode now (undefined: it has no MIG). */
  migMode(cardIndex: number): boolean | undefined {
    return this.mig.mode(this.handle(cardIndex));
  }

  /** The `MIG-` UUID of the MIG device a GPU instance's compute instance makes; undefined when none. */
  migDeviceUuid(cardIndex: number, gpuInstanceId: number, computeInstanceId: number): string | undefined {
    return this.migLayout(cardIndex)?.instances.find(
      (i) => i.gpuInstanceId === gpuInstanceId && i.computeInstanceId === computeInstanceId,
    )?.uuid;
  }

  /** Creating and destroying instances (dynamic MIG); undefined when the library has no MIG exports. */
  migControl(): NvmlMigControl | undefined {
    return NvmlMigControl.bind(
      this.libraryPath,
      (i) => this.handle(i),
      (i) => this.migLayout(i)?.profiles ?? [],
      (call, rc) => this.check(call, rc),
    );
  }

  utilizationRates(cardIndex: number): UtilizationRates {
    const u = { gpu: 0, memory: 0 };
    const rc = this.nv.utilization(this.handle(cardIndex), u) as number;
    if (rc === NVML_ERROR_NOT_SUPPORTED) return { gpuPercent: 0, memoryPercent: 0 };
    this.check('nvmlDeviceGetUtilizationRates', rc);
    return { gpuPercent: u.gpu, memoryPercent: u.memory };
  }

  runningProcesses(cardIndex: number): RunningProcess[] | null {
    const list = this.nv.runningProcesses;
    if (!list) return null;
    const h = this.handle(cardIndex);
    // Processes start between the size query and the read: ask again with room for the newcomers.
    let capacity = 32;
    for (let attempt = 0; attempt < 4; attempt++) {
      const count = [capacity];
      const buf = new Uint8Array(PROCESS_INFO_SIZE * capacity);
      const rc = list(h, count, buf) as number;
      if (rc === NVML_ERROR_NOT_SUPPORTED) return null;
      if (rc === NVML_ERROR_INSUFFICIENT_SIZE) {
        capacity = Math.max(capacity, count[0] ?? 0) + 16;
        continue;
      }
      this.check('nvmlDeviceGetComputeRunningProcesses_v3', rc);
      const view = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
      return Array.from({ length: Math.min(count[0] ?? 0, capacity) }, (_, i) => {
        const used = view.readBigUInt64LE(i * PROCESS_INFO_SIZE + 8);
        return {
          pid: view.readUInt32LE(i * PROCESS_INFO_SIZE),
          usedGpuMemoryBytes: used === NVML_VALUE_NOT_AVAILABLE ? null : Number(used),
        };
      });
    }
    throw new NvmlError(
      'nvmlDeviceGetComputeRunningProcesses_v3',
      NVML_ERROR_INSUFFICIENT_SIZE,
      'process list kept growing',
    );
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.eventSet) this.nv.eventSetFree(this.eventSet);
    this.nv.shutdown();
  }
}

export { EventData, Memory, ProcessSample, Utilization };
