/**
 * The fake NVML's answer for processes time-slicing a card, as a real H200 (driver 580.159.04) gave
 * it (BENCHMARKS.md, "Real GPU"): with FAKEGPU_NVML_ONE_PROCESS=1 each sample interval goes wholly
 * to its busiest process and the others read 0 %, so NVML's per-process figures cannot split a
 * shared card; only the in-process sensor (`computeSensor: in-process`,
 * node-agent/card-sampling/compute-sensor.ts) can. Two unlimited tenants on the fake card,
 * read through the node agent's own NVML binding.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { NvmlGpuSource } from '../../node-agent/nvml/nvml-gpu-source.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const build = join(root, 'native/build');
const dir = mkdtempSync(join(tmpdir(), 'vcuda-nvml-one-'));
const env = {
  FAKEGPU_STATE: join(dir, 'fakegpu.state'),
  FAKEGPU_DEVICES: '1x81559',
  FAKEGPU_NVML_SAMPLE_MS: '100',
  FAKEGPU_NVML_DELAY_MS: '50',
  FAKEGPU_NVML_ONE_PROCESS: '1',
};
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill();
  for (const k of Object.keys(env)) delete process.env[k];
  rmSync(dir, { recursive: true, force: true });
});

describe('the fake NVML, as an H200 answers for a time-sliced card', () => {
  it('gives each interval to one process: the card busy share to it, 0 % to the other', async () => {
    Object.assign(process.env, env); // the fake reads FAKEGPU_* once, at its first call in this process
    const nvml = new NvmlGpuSource({ libraryPath: join(build, 'fake/libnvidia-ml.so.1'), sysfsRoot: dir });
    try {
      const since = Date.now() * 1000;
      const tenant = () =>
        spawn(join(build, 'test/compute_client'), ['storm', '64', '3'], {
          env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env, LD_LIBRARY_PATH: join(build, 'fake') },
          stdio: 'ignore',
        });
      const pair = [tenant(), tenant()];
      children.push(...pair);
      const pids = new Set(pair.map((c) => c.pid));
      // Intervals in which both were sampled and the card was busy, each as the pids' readings
      // (lowest first). An interval in which neither launched anything (both starting up, or
      // both waiting for a core on a loaded host) reads 0 for both and says nothing of the split.
      const shared = () => {
        const byStamp = new Map<number, number[]>();
        for (const s of nvml.processUtilization(0, since)) {
          if (!pids.has(s.pid)) continue;
          byStamp.set(s.timestampUs, [...(byStamp.get(s.timestampUs) ?? []), s.smPercent]);
        }
        return [...byStamp.values()]
          .filter((v) => v.length === 2 && v.some((p) => p > 0))
          .map((v) => [...v].sort((a, b) => a - b));
      };
      await expect.poll(() => shared().length, { timeout: 10_000 }).toBeGreaterThanOrEqual(4);
      const sorted = shared();
      expect(
        sorted.filter(([low]) => low !== 0),
        'intervals that read both processes busy',
      ).toEqual([]);
      // Once both run flat out, the one process reads the whole card, where a fair split reads half each.
      expect(Math.max(...sorted.map(([, high]) => high ?? 0))).toBeGreaterThanOrEqual(90);
    } finally {
      nvml.close();
    }
  });
});
