/**
 * The koffi bindings against a compiled NVML stand-in (signatures, struct offsets, the async
 * event wait), and against native/'s fake NVML when `make -C native` has built it.
 */
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { NvmlGpuSource } from './nvml-gpu-source.js';

const here = dirname(fileURLToPath(import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'vcuda-nvml-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function compileStub(): string | undefined {
  const out = join(tmp, 'libnvidia-ml-stub.so');
  try {
    execFileSync('cc', ['-shared', '-fPIC', '-O1', '-o', out, join(here, 'testdata/stub-nvml.c')], { stdio: 'pipe' });
    return out;
  } catch {
    return undefined;
  }
}

const stub = compileStub();

describe.skipIf(!stub)('NVML through koffi (stub library)', () => {
  it('reads cards, PCI ids, minors, memory and topology', () => {
    const gpu = new NvmlGpuSource({ libraryPath: stub as string, sysfsRoot: join(tmp, 'no-sysfs') });
    try {
      expect(gpu.listCards()).toEqual(
        [0, 1].map((i) => ({
          index: i,
          uuid: `GPU-0000000${i}-1111-2222-3333-444444444444`,
          model: 'Stub H100',
          memoryTotalBytes: 85520809984,
          pciBusId: `00000000:${(0x3b + i).toString(16).toUpperCase()}:00.0`,
          minorNumber: 4 + i,
          numaNode: null,
          architecture: 'Hopper',
          computeCapability: '9.0',
          driverVersion: '570.86.15',
        })),
      );
      expect(gpu.link(0, 1)).toEqual({ nvlinks: 3, pcie: 'multiple' });
      expect(gpu.link(1, 1)).toEqual({ nvlinks: 0, pcie: 'internal' });
      expect(gpu.memoryUsage(1)).toEqual({ totalBytes: 85520809984, usedBytes: 2048, freeBytes: 85520809984 - 2048 });
      expect(gpu.utilizationRates(1)).toEqual({ gpuPercent: 41, memoryPercent: 7 });
      expect(gpu.processUtilization(0, 0)).toEqual([
        { pid: 101, timestampUs: 1000, smPercent: 30, memoryPercent: 5 },
        { pid: 202, timestampUs: 2000, smPercent: 45, memoryPercent: 6 },
      ]);
      expect(gpu.processUtilization(0, 5000)).toEqual([]);
      expect(gpu.runningProcesses(0)).toEqual([
        { pid: 101, usedGpuMemoryBytes: 512 * 1024 * 1024 },
        { pid: 202, usedGpuMemoryBytes: null },
      ]);
      expect(gpu.runningProcesses(1)).toEqual([]);
      // More samples at the read than the size query announced: read them all, do not fail.
      const grown = gpu.processUtilization(0, 500);
      expect(grown).toHaveLength(40);
      expect(grown[39]).toEqual({ pid: 339, timestampUs: 639, smPercent: 1, memoryPercent: 0 });
    } finally {
      gpu.close();
    }
  });

  it('turns an Xid event into a card event without blocking the event loop', async () => {
    const gpu = new NvmlGpuSource({ libraryPath: stub as string, sysfsRoot: tmp });
    try {
      expect(await gpu.waitEvent(50)).toEqual({ cardIndex: 1, kind: 'xid', xid: 79 });
      let ticks = 0;
      const timer = setInterval(() => ticks++, 5);
      expect(await gpu.waitEvent(100)).toBeUndefined();
      clearInterval(timer);
      expect(ticks).toBeGreaterThan(0);
    } finally {
      gpu.close();
    }
  });
});

const fakeNvml = join(here, '../../native/build/fake/libnvidia-ml.so.1');

const fakeCtl = join(here, '../../native/build/fake/fakegpu-ctl');

describe.skipIf(!existsSync(fakeNvml) || !existsSync(fakeCtl))("NVML through koffi (native/'s fake NVML)", () => {
  it('lists the simulated cards and turns an injected Xid into a card event', async () => {
    // The fake reads its machine from the environment of the process that loads it.
    const env = { FAKEGPU_DEVICES: '2x81559', FAKEGPU_STATE: join(tmp, 'fakegpu.state') };
    Object.assign(process.env, env);
    const gpu = new NvmlGpuSource({ libraryPath: fakeNvml, sysfsRoot: tmp });
    try {
      const cards = gpu.listCards();
      expect(cards.map((c) => [c.index, c.memoryTotalBytes])).toEqual([
        [0, 81559 * 1024 * 1024],
        [1, 81559 * 1024 * 1024],
      ]);
      expect(new Set(cards.map((c) => c.uuid)).size).toBe(2);
      expect(cards.every((c) => /^GPU-/.test(c.uuid))).toBe(true);
      expect(gpu.link(0, 1).pcie).toMatch(/internal|single|multiple|hostbridge|node|system/);
      expect(await gpu.waitEvent(10)).toBeUndefined();
      execFileSync(fakeCtl, ['xid', '1', '79'], { env: { ...process.env, ...env }, stdio: 'pipe' });
      expect(await gpu.waitEvent(2000)).toEqual({ cardIndex: 1, kind: 'xid', xid: 79 });
    } finally {
      gpu.close();
      delete process.env['FAKEGPU_DEVICES'];
      delete process.env['FAKEGPU_STATE'];
    }
  });
});

const fakeCuda = join(here, '../../native/build/fake/libcuda.so.1');

describe.skipIf(!existsSync(fakeNvml) || !existsSync(fakeCuda))(
  "concurrent managed access through the CUDA driver (native/'s fake driver)",
  () => {
    /** NVML and the CUDA driver over one fresh fake machine: each loaded copy reads its environment once. */
    function open(name: string, env: Record<string, string>) {
      const dir = join(tmp, name);
      mkdirSync(dir, { recursive: true });
      copyFileSync(fakeNvml, join(dir, 'libnvidia-ml.so.1'));
      copyFileSync(fakeCuda, join(dir, 'libcuda.so.1'));
      const all = { FAKEGPU_DEVICES: '2x1024', FAKEGPU_STATE: join(dir, 'fakegpu.state'), ...env };
      Object.assign(process.env, all);
      try {
        return new NvmlGpuSource({
          libraryPath: join(dir, 'libnvidia-ml.so.1'),
          sysfsRoot: dir,
          cudaLibraryPath: join(dir, 'libcuda.so.1'),
        });
      } finally {
        for (const k of Object.keys(all)) delete process.env[k];
      }
    }

    it('reads the attribute per card, matched to NVML by PCI bus id', () => {
      const capable = open('managed', {});
      const incapable = open('no-managed', { FAKEGPU_CONCURRENT_MANAGED: '0' });
      try {
        expect(capable.listCards().map((c) => c.concurrentManagedAccess)).toEqual([true, true]);
        expect(incapable.listCards().map((c) => c.concurrentManagedAccess)).toEqual([false, false]);
      } finally {
        capable.close();
        incapable.close();
      }
    });

    it('says nothing (never guesses) when the CUDA driver cannot be loaded', () => {
      const dir = join(tmp, 'no-cuda');
      mkdirSync(dir, { recursive: true });
      copyFileSync(fakeNvml, join(dir, 'libnvidia-ml.so.1'));
      Object.assign(process.env, { FAKEGPU_DEVICES: '1x1024', FAKEGPU_STATE: join(dir, 'fakegpu.state') });
      try {
        const gpu = new NvmlGpuSource({
          libraryPath: join(dir, 'libnvidia-ml.so.1'),
          sysfsRoot: dir,
          cudaLibraryPath: join(dir, 'absent-libcuda.so.1'),
        });
        expect(gpu.listCards()[0]).not.toHaveProperty('concurrentManagedAccess');
        gpu.close();
      } finally {
        delete process.env['FAKEGPU_DEVICES'];
        delete process.env['FAKEGPU_STATE'];
      }
    });
  },
);

const computeClient = join(here, '../../native/build/test/compute_client');

describe.skipIf(!existsSync(fakeNvml) || !existsSync(computeClient))(
  "per-process samples over native/'s fake NVML: versioned call first, old call as fallback",
  () => {
    /** A fresh fake machine with a tenant running kernels; samples read while it runs. */
    async function samplesWith(name: string, env: Record<string, string>) {
      const dir = join(tmp, name);
      mkdirSync(dir, { recursive: true });
      copyFileSync(fakeNvml, join(dir, 'libnvidia-ml.so.1'));
      const all = {
        FAKEGPU_DEVICES: '1x1024',
        FAKEGPU_STATE: join(dir, 'fakegpu.state'),
        FAKEGPU_NVML_SAMPLE_MS: '50',
        FAKEGPU_NVML_DELAY_MS: '50',
        ...env,
      };
      Object.assign(process.env, all);
      const gpu = new NvmlGpuSource({ libraryPath: join(dir, 'libnvidia-ml.so.1'), sysfsRoot: dir });
      for (const k of Object.keys(all)) delete process.env[k];
      const tenant = execFile(computeClient, ['sync', '132', '3'], {
        env: { ...process.env, ...all, LD_LIBRARY_PATH: dirname(fakeNvml) },
      });
      try {
        const deadline = Date.now() + 3000;
        for (;;) {
          const samples = gpu.processUtilization(0, 0);
          if (samples.some((s) => s.pid === tenant.pid && s.smPercent > 0) || Date.now() > deadline) {
            return { samples, pid: tenant.pid, source: gpu.lastSampleSource };
          }
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        tenant.kill();
        gpu.close();
      }
    }

    it('reads nvmlDeviceGetProcessesUtilizationInfo where the driver has it', async () => {
      const { samples, pid, source } = await samplesWith('util-info', {});
      expect(source).toBe('processes-utilization-info');
      expect(samples.some((s) => s.pid === pid && s.smPercent > 0 && s.timestampUs > 0)).toBe(true);
    });

    it('falls back to nvmlDeviceGetProcessUtilization where the driver answers NOT_SUPPORTED', async () => {
      const { samples, pid, source } = await samplesWith('util-legacy', { FAKEGPU_NVML_UTIL_INFO: '0' });
      expect(source).toBe('process-utilization');
      expect(samples.some((s) => s.pid === pid && s.smPercent > 0)).toBe(true);
    });
  },
);

describe.skipIf(!existsSync(fakeNvml))('whether a card has per-process utilization at all', () => {
  /** A fresh copy of the fake NVML (it reads FAKEGPU_* once per load) with `env`. */
  function supportedWith(name: string, env: Record<string, string>): boolean {
    const dir = join(tmp, name);
    mkdirSync(dir, { recursive: true });
    copyFileSync(fakeNvml, join(dir, 'libnvidia-ml.so.1'));
    const all = { FAKEGPU_DEVICES: '1x1024', FAKEGPU_STATE: join(dir, 'fakegpu.state'), ...env };
    Object.assign(process.env, all);
    const gpu = new NvmlGpuSource({ libraryPath: join(dir, 'libnvidia-ml.so.1'), sysfsRoot: dir });
    for (const k of Object.keys(all)) delete process.env[k];
    try {
      return gpu.processUtilizationSupported(0);
    } finally {
      gpu.close();
    }
  }

  it('says so on an ordinary card, and not where both calls answer NOT_SUPPORTED (MIG)', () => {
    expect(supportedWith('util-supported', {})).toBe(true);
    expect(supportedWith('util-legacy-only', { FAKEGPU_NVML_UTIL_INFO: '0' })).toBe(true);
    expect(supportedWith('util-unsupported', { FAKEGPU_NVML_PROCESS_UTIL: '0' })).toBe(false);
    expect(supportedWith('util-mig', { FAKEGPU_DEVICES: '1x81559', FAKEGPU_MIG: 'all' })).toBe(false);
  });
});
