/**
 * A prepared claim as a CDI spec (pure builder, atomic writer). The spec's own edits are what every
 * container of the claim receives, built by the device-plugin path's Allocate answer: the control
 * device nodes, the driver libraries, libvcuda.so with the read-only preload file, the claim's
 * limit-file and region directories, `VCUDA_CONFIG`, and the visible-devices env of all the
 * claim's cards. Each allocated device is one CDI device whose edits are its card's device node
 * (as PreStartContainer's spec gives it), so the kubelet can hand out devices per request. A claim
 * of whole MIG instances gets what device-plugin mode gives them (buildClaimMigCdiSpec).
 */
import { join } from 'node:path';
import type { ContainerAllocateResponse } from '../kubelet/protocol.js';
import { buildAllocateResponse, buildMigAllocateResponse, type ResponseSettings } from '../limits/allocate-response.js';
import {
  buildCdiSpec,
  buildMigCdiSpec,
  CDI_VERSION,
  type CdiCard,
  type CdiMigDevice,
  writeCdiSpecFile,
} from '../limits/cdi-spec.js';
import type { ContainerPaths } from '../limits/container-files.js';

export type ClaimCdiDevice = { device: string; card: CdiCard };
/** A MIG partition's device name in the claim, and the instance handed over for it. */
export type ClaimMigCdiDevice = CdiMigDevice & { device: string };

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

/**
 * The spec's common edits (every container of the claim) and one CDI device per allocated device,
 * `<key>-<device>`, with the device nodes `edits` gives it (the device-plugin spec of that device alone).
 */
function claimSpec<D extends { device: string }>(
  driver: string,
  key: string,
  common: ContainerAllocateResponse,
  env: readonly string[],
  devices: readonly D[],
  edits: (d: D) => { deviceNodes: unknown[] } | undefined,
) {
  return {
    cdiVersion: CDI_VERSION,
    kind: claimCdiKind(driver),
    containerEdits: {
      env: [...Object.entries(common.envs).map(([k, v]) => `${k}=${v}`), ...env],
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
      name: `${key}-${d.device}`,
      containerEdits: { deviceNodes: edits(d)?.deviceNodes ?? [] },
    })),
  };
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
  return claimSpec(
    driver,
    paths.key,
    common,
    visible,
    devices,
    (d) => buildCdiSpec(paths.key, [d.card], s).devices[0]?.containerEdits,
  );
}

/**
 * A claim of whole MIG instances: the control nodes and driver libraries for every container, the
 * instances' `MIG-` UUIDs as the visible devices, and per allocated partition its parent's node and
 * its two access nodes. No libvcuda, preload or limit file: a whole instance is never capped.
 */
export function buildClaimMigCdiSpec(
  driver: string,
  paths: ContainerPaths,
  devices: readonly ClaimMigCdiDevice[],
  s: ResponseSettings,
) {
  const common = buildMigAllocateResponse(paths, s);
  const visible = buildMigCdiSpec(paths.key, devices, s).devices[0]?.containerEdits.env ?? [];
  return claimSpec(
    driver,
    paths.key,
    common,
    visible,
    devices,
    (d) => buildMigCdiSpec(paths.key, [d], s).devices[0]?.containerEdits,
  );
}

export function writeClaimMigCdiSpec(
  cdiSpecDir: string,
  driver: string,
  paths: ContainerPaths,
  devices: readonly ClaimMigCdiDevice[],
  s: ResponseSettings,
): void {
  writeCdiSpecFile(claimCdiSpecPath(cdiSpecDir, driver, paths.key), buildClaimMigCdiSpec(driver, paths, devices, s));
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
