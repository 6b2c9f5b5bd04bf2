/**
 * What a container receives from Allocate (pure). It depends on the allocation's key only, never
 * on the pod (Allocate does not know it): the control device nodes, the driver libraries,
 * libvcuda.so with a read-only /etc/ld.so.preload naming it, the allocation's config and region
 * directories, the env that points libvcuda at its limit file, and the CDI device that
 * PreStartContainer fills in with the granted cards.
 */
import type { ContainerAllocateResponse, DeviceSpec, Mount } from '../kubelet/protocol.js';
import { cdiDeviceName } from './cdi-spec.js';
import {
  CONTAINER_CONFIG_DIR,
  CONTAINER_CONFIG_PATH,
  CONTAINER_RUN_DIR,
  type ContainerPaths,
} from './container-files.js';

export type ResponseSettings = {
  devDir: string;
  libvcudaHostPath: string;
  libvcudaContainerPath: string;
  preloadHostPath: string;
  driverLibraries: readonly { hostPath: string; containerPath: string }[];
  setVisibleDevicesEnv: boolean;
};

const CONTROL_NODES = ['nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools'];

function controlNodes(s: ResponseSettings): DeviceSpec[] {
  return CONTROL_NODES.map((name) => ({
    container_path: `/dev/${name}`,
    host_path: `${s.devDir}/${name}`,
    permissions: 'rw',
  }));
}

function driverMounts(s: ResponseSettings): Mount[] {
  return s.driverLibraries.map((l) => ({ container_path: l.containerPath, host_path: l.hostPath, read_only: true }));
}

/**
 * Whole MIG instances are never capped: the control nodes, the driver libraries and the CDI device
 * PreStartContainer fills in with the instances, and no libvcuda, preload or limit file.
 */
export function buildMigAllocateResponse(paths: ContainerPaths, s: ResponseSettings): ContainerAllocateResponse {
  return {
    envs: {},
    mounts: driverMounts(s),
    devices: controlNodes(s),
    annotations: {},
    cdi_devices: [{ name: cdiDeviceName(paths.key) }],
  };
}

export function buildAllocateResponse(paths: ContainerPaths, s: ResponseSettings): ContainerAllocateResponse {
  const mounts: Mount[] = [
    ...driverMounts(s),
    { container_path: s.libvcudaContainerPath, host_path: s.libvcudaHostPath, read_only: true },
    { container_path: '/etc/ld.so.preload', host_path: s.preloadHostPath, read_only: true },
    { container_path: CONTAINER_CONFIG_DIR, host_path: paths.configDir, read_only: true },
    { container_path: CONTAINER_RUN_DIR, host_path: paths.runDir, read_only: false },
  ];
  return {
    envs: { VCUDA_CONFIG: CONTAINER_CONFIG_PATH },
    mounts,
    devices: controlNodes(s),
    annotations: {},
    cdi_devices: [{ name: cdiDeviceName(paths.key) }],
  };
}

/** The content of the shared ld.so.preload file. */
export function preloadFileContent(libvcudaContainerPath: string): string {
  return `${libvcudaContainerPath}\n`;
}
