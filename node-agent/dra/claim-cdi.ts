/**
 * A prepared claim as a CDI spec (pure builder, atomic writer). The spec's own edits are what every
 * container of the claim receives, built by the device-plugin path's Allocate answer: the control
 * device nodes, the driver libraries, libvcuda.so with the read-only preload file, the claim's
 * limit-file and region directories, `VCUDA_CONFIG`, and the visible-devices env of all the
 * claim's cards. Each allocated device is one CDI device whose edits are its card's device node
 * (as PreStartContainer's spec gives it), so the kubelet can hand out devices per request.
 */
import { join } from 'node:path';
import { buildAllocateResponse, type ResponseSettings } from '../limits/allocate-response.js';
import { buildCdiSpec, CDI_VERSION, type CdiCard, writeCdiSpecFile } from '../limits/cdi-spec.js';
import type { ContainerPaths } from '../limits/container-files.js';

export type ClaimCdiDevice = { device: string; card: CdiCard };

/** `<driver>/claim`: the CDI kind of the claims of one driver. */
export function claimCdiKind(driver: string): string {
  return `${driver}/claim`;
}

export function claimCdiDeviceId(driver: string, key: string, device: string): string {
  return `${claimCdiKind(driver)}=${key}-${device}`;
}

export function claimCdiSpecPath(cdiSpecDir: string, driver: string, key: string): string {
  return join(cdiSpecDir, `${driver}-claim-${key}.json`);
}

export function buildClaimCdiSpec(
  driver: string,
  paths: ContainerPaths,
  devices: readonly ClaimCdiDevice[],
  s: ResponseSettings,
) {
  const common = buildAllocateResponse(paths, { ...s, setVisibleDevicesEnv: false });
  const cards = [...new Map(devices.map((d) => [d.card.uuid, d.card])).values()];
  const visible = buildCdiSpec(paths.key, cards, s).devices[0]?.containerEdits.env ?? [];
  return {
    cdiVersion: CDI_VERSION,
    kind: claimCdiKind(driver),
    containerEdits: {
      env: [...Object.entries(common.envs).map(([k, v]) => `${k}=${v}`), ...visible],
      deviceNodes: common.devices.map((d) => ({
        path: d.container_path,
        hostPath: d.host_path,
        permissions: d.permissions,
      })),
      mounts: common.mounts.map((m) => ({
        hostPath: m.host_path,
        containerPath: m.container_path,
        options: [m.read_only ? 'ro' : 'rw', 'nosuid', 'nodev', 'bind'],
      })),
    },
    devices: devices.map((d) => ({
      name: `${paths.key}-${d.device}`,
      containerEdits: {
        deviceNodes: buildCdiSpec(paths.key, [d.card], s).devices[0]?.containerEdits.deviceNodes ?? [],
      },
    })),
  };
}

export function writeClaimCdiSpec(
  cdiSpecDir: string,
  driver: string,
  paths: ContainerPaths,
  devices: readonly ClaimCdiDevice[],
  s: ResponseSettings,
): void {
  writeCdiSpecFile(claimCdiSpecPath(cdiSpecDir, driver, paths.key), buildClaimCdiSpec(driver, paths, devices, s));
}
