/**
 * native/'s fake NVML for node-agent tests (when `make -C native` has built it): one fake machine
 * per test file, its state file and the sysfs root NVML reads in a temp directory removed after
 * the file's tests. The library reads FAKEGPU_* from its process's environment once per load, so
 * `enter()` puts them there before the first NVML source opens it, and `leave()` takes them out.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { NvmlGpuSource } from '../../../node-agent/nvml/nvml-gpu-source.js';

const fakeDir = fileURLToPath(new URL('../../../native/build/fake/', import.meta.url));
export const fakeNvmlLibrary = join(fakeDir, 'libnvidia-ml.so.1');
export const fakeGpuCtl = join(fakeDir, 'fakegpu-ctl');
/** Whether `make -C native` has built the fake NVML and its control tool. */
export const isFakeNvmlBuilt = existsSync(fakeNvmlLibrary) && existsSync(fakeGpuCtl);

export type FakeNvmlMachine = {
  /** The temp directory: the fake's state file and the sysfs root NVML reads. */
  dir: string;
  /** This machine's FAKEGPU_* variables. */
  env: Record<string, string>;
  /** Runs fakegpu-ctl on this machine; its output, trimmed. */
  ctl: (...args: string[]) => string;
  /** Creates the GPU instance of `profileId` at `start` on `card`; its `MIG-` UUID. */
  createMig: (card: number, profileId: number, start: number) => string;
  /** A new NVML source over the fake library (call `enter()` first). */
  open: () => NvmlGpuSource;
  /** The source `open` gave last: a restarted agent's own (throws before the first). */
  lastOpened: () => NvmlGpuSource;
  enter: () => void;
  leave: () => void;
};

/**
 * A fake machine: `devices` as FAKEGPU_DEVICES (`3x81559`: three H100 80GB), `mig` as FAKEGPU_MIG
 * (the cards in MIG mode, `0,1`). Call at a test file's top level: it registers the cleanup.
 */
export function fakeNvmlMachine(prefix: string, machine: { devices: string; mig?: string }): FakeNvmlMachine {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const env: Record<string, string> = {
    FAKEGPU_DEVICES: machine.devices,
    ...(machine.mig === undefined ? {} : { FAKEGPU_MIG: machine.mig }),
    FAKEGPU_STATE: join(dir, 'state'),
  };
  const ctl = (...args: string[]) =>
    execFileSync(fakeGpuCtl, args, { env: { ...process.env, ...env }, stdio: 'pipe' })
      .toString()
      .trim();
  let last: NvmlGpuSource | undefined;
  return {
    dir,
    env,
    ctl,
    createMig: (card, profileId, start) =>
      ctl('mig-create', String(card), String(profileId), String(start)).split(' ')[1] as string,
    open: () => {
      last = new NvmlGpuSource({ libraryPath: fakeNvmlLibrary, sysfsRoot: dir });
      return last;
    },
    lastOpened: () => {
      if (!last) throw new Error(`no NVML source opened on the fake machine in ${dir} yet`);
      return last;
    },
    enter: () => Object.assign(process.env, env),
    leave: () => {
      for (const k of Object.keys(env)) delete process.env[k];
    },
  };
}
