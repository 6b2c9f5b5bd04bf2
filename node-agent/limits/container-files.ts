/**
 * One container's host directory: `<containersDir>/<podUID>/<container>/` holding
 * `vcuda.conf` (the native limit file, mounted read-only at /etc/vcuda/vcuda.conf) and
 * `run/region` (the accounting region; `run/` is mounted read-write at /run/vcuda).
 */
import { mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DeviceLimit, encodeLimitConfig } from '../../contract/index.js';
import { ensureRegionFile } from './region-file.js';

export const CONTAINER_CONFIG_PATH = '/etc/vcuda/vcuda.conf';
export const CONTAINER_RUN_DIR = '/run/vcuda';
export const CONTAINER_REGION_PATH = `${CONTAINER_RUN_DIR}/region`;

export type ContainerPaths = { dir: string; configPath: string; runDir: string; regionPath: string };

export function containerPaths(containersDir: string, podUid: string, container: string): ContainerPaths {
  const dir = join(containersDir, podUid, container);
  const runDir = join(dir, 'run');
  return { dir, configPath: join(dir, 'vcuda.conf'), runDir, regionPath: join(runDir, 'region') };
}

/** Writes the limit file (atomically: a half-written file is never visible) and creates the region. */
export function writeContainerFiles(input: {
  containersDir: string;
  podUid: string;
  container: string;
  devices: DeviceLimit[];
  nowMs: number;
}): ContainerPaths {
  const paths = containerPaths(input.containersDir, input.podUid, input.container);
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
  ensureRegionFile(paths.regionPath, input.devices.length);
  return paths;
}

/** Pod directories under `containersDir`, with when each was last written. */
export function listPodDirs(containersDir: string): { podUid: string; modifiedAtMs: number }[] {
  try {
    return readdirSync(containersDir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => ({ podUid: d.name, modifiedAtMs: statSync(join(containersDir, d.name)).mtimeMs }));
  } catch {
    return [];
  }
}

export function removePodDir(containersDir: string, podUid: string): void {
  if (!podUid || podUid.includes('/') || podUid === '..' || podUid === '.') return;
  rmSync(join(containersDir, podUid), { recursive: true, force: true });
}
