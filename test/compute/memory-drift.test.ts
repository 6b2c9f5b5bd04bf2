/**
 * The memory-drift backstop end to end on the fake GPU: real processes allocate through the fake
 * driver, libvcuda charges the container's region, and the node agent's monitor reads NVML's
 * process list through the koffi binding (the fake NVML reports each process's real allocations).
 * The fake driver takes 500 MiB per context where libvcuda's estimate is 300 MiB, and a second
 * process of the container runs without libvcuda: both show as positive drift.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeLimitConfig } from '../../contract/limit-config.js';
import { createMemoryDriftMonitor, type DriftRecord } from '../../node-agent/card-sampling/memory-drift.js';
import { regionCharge } from '../../node-agent/card-sampling/placement.js';
import { AgentMetrics } from '../../node-agent/metrics.js';
import { NvmlGpuSource } from '../../node-agent/nvml/nvml-gpu-source.js';
import { recordingLog } from '../support/node-agent/recording-log.js';

const build = join(process.cwd(), 'native/build');
const memClient = join(build, 'test/mem_client');
const fakeNvml = join(build, 'fake/libnvidia-ml.so.1');
const MiB = 2 ** 20;
const dir = mkdtempSync(join(tmpdir(), 'vcuda-drift-'));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const fakeEnv = {
  FAKEGPU_STATE: join(dir, 'fakegpu.state'),
  FAKEGPU_DEVICES: '1x16384',
  FAKEGPU_CONTEXT_MIB: '500',
};

/** Starts `mem_client hold MIB` and resolves with its pid once it holds the memory. */
function hold(mib: number, env: Record<string, string>): Promise<number> {
  const child = spawn(memClient, ['hold', String(mib)], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LD_LIBRARY_PATH: join(build, 'fake'), ...fakeEnv, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) =>
      line === 'ready' ? resolve(child.pid as number) : reject(new Error(`mem_client: ${line}`)),
    );
    child.once('exit', (code) => reject(new Error(`mem_client exited (${code}) before holding`)));
  });
}

describe.skipIf(!existsSync(memClient) || !existsSync(fakeNvml))('memory drift over the fake driver', () => {
  it('shows the context estimate as small drift and memory allocated past libvcuda as a drift event', async () => {
    // The fake NVML reads its machine from the environment of the process that loads it.
    Object.assign(process.env, fakeEnv);
    const gpu = new NvmlGpuSource({ libraryPath: fakeNvml, sysfsRoot: join(dir, 'sys') });
    try {
      const uuid = gpu.listCards()[0]?.uuid as string;
      const regionPath = join(dir, 'c.region');
      const configPath = join(dir, 'c.conf');
      writeFileSync(
        configPath,
        encodeLimitConfig({
          podUid: 'pod-drift',
          containerName: 'main',
          regionPath,
          writtenAtMs: Date.now(),
          devices: [
            { uuid, hostIndex: 0, mode: 'hard', memoryLimitBytes: 4 * 2 ** 30, coreRequest: 100, coreLimit: 100 },
          ],
        }),
      );
      const pids = new Set<number>();
      const metrics = new AgentMetrics();
      const { log, lines: warnings } = recordingLog();
      const monitor = createMemoryDriftMonitor({
        cardIndex: 0,
        source: gpu,
        targets: () => [
          { key: 'c', namespace: 'ml', pod: 'p', container: 'main', cardUuid: uuid, regionPath, deviceIndex: 0 },
        ],
        containerOfPid: (pid) => (pids.has(pid) ? 'c' : null),
        readCharged: regionCharge,
        thresholdBytes: 256 * MiB,
        sink: metrics,
        log,
        nowMs: Date.now,
      });
      const reconcile = (n: number) => {
        let last: DriftRecord[] | null = null;
        for (let i = 0; i < n; i++) last = monitor.reconcileOnce();
        return last;
      };

      pids.add(
        await hold(512, {
          LD_PRELOAD: join(build, 'libvcuda.so'),
          VCUDA_CONFIG: configPath,
          VCUDA_CONTEXT_OVERHEAD_MIB: '300',
        }),
      );
      // Charged 512 + 300 (the estimate); the driver holds 512 + 500: +200 MiB, within the threshold.
      expect(reconcile(3)).toEqual([
        expect.objectContaining({ nvmlUsedBytes: 1012 * MiB, chargedBytes: 812 * MiB, driftBytes: 200 * MiB }),
      ]);
      expect(warnings).toEqual([]);

      // A process of the same container without libvcuda: nothing charged, 1012 MiB more on the card.
      pids.add(await hold(512, {}));
      expect(reconcile(3)).toEqual([
        expect.objectContaining({ nvmlUsedBytes: 2024 * MiB, chargedBytes: 812 * MiB, driftBytes: 1212 * MiB }),
      ]);
      const drift = await metrics.registry.getSingleMetric('vcuda_container_memory_drift_bytes')?.get();
      expect(drift?.values.map((v) => v.value)).toEqual([1212 * MiB]);
      const events = await metrics.registry.getSingleMetric('vcuda_container_memory_drift_events_total')?.get();
      expect(events?.values).toEqual([
        expect.objectContaining({ labels: { card: uuid, direction: 'over' }, value: 1 }),
      ]);
      expect(warnings).toHaveLength(1);
    } finally {
      gpu.close();
      for (const k of Object.keys(fakeEnv)) delete process.env[k];
    }
  });
});
