/**
 * What a container receives (pure): device nodes of its cards plus the control nodes, the driver
 * libraries, libvcuda.so with a read-only /etc/ld.so.preload naming it, its limit file and its
 * region directory, and the env that points libvcuda at the file.
 */
import type { ContainerAllocateResponse, DeviceSpec, Mount } from '../device-plugin/protocol.js';
import { CONTAINER_CONFIG_PATH, CONTAINER_RUN_DIR, type ContainerPaths } from './container-files.js';

export type ResponseCard = { uuid: string; minorNumber: number };

export type ResponseSettings = {
  devDir: string;
  libvcudaHostPath: string;
  libvcudaContainerPath: string;
  preloadHostPath: string;
  driverLibraries: readonly { hostPath: string; containerPath: string }[];
  setVisibleDevicesEnv: boolean;
};

const CONTROL_NODES = ['nvidiactl', 'nvidia-uvm', 'nvidia-uvm-tools'];

export function buildAllocateResponse(
  cards: readonly ResponseCard[],
  paths: ContainerPaths,
  s: ResponseSettings,
): ContainerAllocateResponse {
  const node = (name: string): DeviceSpec => ({
    container_path: `/dev/${name}`,
    host_path: `${s.devDir}/${name}`,
    permissions: 'rw',
  });
  const devices = [...cards.map((c) => node(`nvidia${c.minorNumber}`)), ...CONTROL_NODES.map(node)];
  const mounts: Mount[] = [
    ...s.driverLibraries.map((l) => ({ container_path: l.containerPath, host_path: l.hostPath, read_only: true })),
    { container_path: s.libvcudaContainerPath, host_path: s.libvcudaHostPath, read_only: true },
    { container_path: '/etc/ld.so.preload', host_path: s.preloadHostPath, read_only: true },
    { container_path: CONTAINER_CONFIG_PATH, host_path: paths.configPath, read_only: true },
    { container_path: CONTAINER_RUN_DIR, host_path: paths.runDir, read_only: false },
  ];
  const envs: Record<string, string> = { VCUDA_CONFIG: CONTAINER_CONFIG_PATH };
  if (s.setVisibleDevicesEnv) {
    const uuids = cards.map((c) => c.uuid).join(',');
    envs['NVIDIA_VISIBLE_DEVICES'] = uuids;
    envs['CUDA_VISIBLE_DEVICES'] = uuids;
  }
  return { envs, mounts, devices, annotations: {}, cdi_devices: [] };
}

/** The content of the shared ld.so.preload file. */
export function preloadFileContent(libvcudaContainerPath: string): string {
  return `${libvcudaContainerPath}\n`;
}
