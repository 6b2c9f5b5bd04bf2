/**
 * One allocation's host directory, named by the kubelet's device IDs, not by a pod:
 * `<containersDir>/<key>/` with `etc/vcuda.conf` (the native limit file; `etc/` is mounted
 * read-only at /etc/vcuda) and `run/region` (the accounting region; `run/` is mounted read-write
 * at /run/vcuda). Allocate creates the directory empty (it does not know the pod yet);
 * PreStartContainer writes the files once it knows which container holds the devices.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DeviceLimit, encodeLimitConfig } from '../../contract/index.js';
import { ensureRegionFile } from './region-file.js';

export const CONTAINER_CONFIG_DIR = '/etc/vcuda';
export const CONTAINER_CONFIG_PATH = `${CONTAINER_CONFIG_DIR}/vcuda.conf`;
export const CONTAINER_RUN_DIR = '/run/vcuda';
export const CONTAINER_REGION_PATH = `${CONTAINER_RUN_DIR}/region`;

export type ContainerPaths = {
  key: string;
  dir: string;
  configDir: string;
  configPath: string;
  runDir: string;
  regionPath: string;
};

/**
 * The name of an allocation: a hash of its sorted device IDs. The kubelet gives a device ID to
 * one live container at a time, so while a container lives its key names it alone.
 */
export function allocationKey(deviceIds: readonly string[]): string {
  const h = createHash('sha256');
  for (const id of [...deviceIds].sort()) h.update(id).update('\n');
  return `a${h.digest('hex').slice(0, 32)}`;
}

export function containerPaths(containersDir: string, key: string): ContainerPaths {
  const dir = join(containersDir, key);
  const configDir = join(dir, 'etc');
  const runDir = join(dir, 'run');
  return { key, dir, configDir, configPath: join(configDir, 'vcuda.conf'), runDir, regionPath: join(runDir, 'region') };
}

/**
 * An Allocate: the directory exists (the runtime mounts it) and holds nothing. A limit file or
 * region left by an earlier holder of the same devices goes, so a container whose PreStart never
 * ran finds no limit file and libvcuda refuses it every byte.
 */
export function resetAllocationDir(paths: ContainerPaths): void {
  rmSync(paths.configPath, { force: true });
  rmSync(paths.regionPath, { force: true });
  mkdirSync(paths.configDir, { recursive: true, mode: 0o755 });
  mkdirSync(paths.runDir, { recursive: true, mode: 0o755 });
  // Housekeeping's grace counts from the latest Allocate, also for devices used before.
  const now = new Date();
  utimesSync(paths.dir, now, now);
}

/**
 * Writes the limit file (atomically: a half-written file is never visible) and creates the
 * region. `freshRegion` replaces a region another container of the same allocation left (an init
 * container whose devices the kubelet handed on); a region of the same container is kept, because
 * its running processes map it.
 */
export function writeContainerFiles(input: {
  paths: ContainerPaths;
  podUid: string;
  container: string;
  devices: DeviceLimit[];
  nowMs: number;
  freshRegion: boolean;
}): void {
  const { paths } = input;
  mkdirSync(paths.configDir, { recursive: true, mode: 0o755 });
  mkdirSync(paths.runDir, { recursive: true, mode: 0o755 });
  const buf = encodeLimitConfig({
    podUid: input.podUid,
    containerName: input.container,
    regionPath: CONTAINER_REGION_PATH,
    writtenAtMs: input.nowMs,
    devices: input.devices,
  });
  const tmp = `${paths.configPath}.tmp`;
  writeFileSync(tmp, buf, { mode: 0o644 });
  renameSync(tmp, paths.configPath);
  if (input.freshRegion) rmSync(paths.regionPath, { force: true });
  ensureRegionFile(paths.regionPath, input.devices.length);
}

/** Allocation directories under `containersDir`, with when each was last written. */
export function listAllocationDirs(containersDir: string): { key: string; modifiedAtMs: number }[] {
  try {
    return readdirSync(containersDir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => ({ key: d.name, modifiedAtMs: statSync(join(containersDir, d.name)).mtimeMs }));
  } catch {
    // No containers folder (yet): there is nothing to clean up.
    return [];
  }
}

export function removeAllocationDir(containersDir: string, key: string): void {
  if (!key || key.includes('/') || key === '..' || key === '.') return;
  rmSync(join(containersDir, key), { recursive: true, force: true });
}
