import { describe, expect, it } from 'vitest';
import { FakeGpuSource, MiB } from '../../test/support/node-agent/fake-gpu-source.js';
import { recordingLog } from '../../test/support/node-agent/recording-log.js';
import { AgentMetrics } from '../metrics.js';
import { createCardSampler } from './card-sampler.js';
import { createMemoryDriftMonitor, type DriftTarget, memoryDrift, nextDriftState } from './memory-drift.js';

const owner = (pids: Record<number, string>) => (pid: number) => pids[pid] ?? null;

describe('memoryDrift (pure)', () => {
  it('sums NVML memory per container and subtracts its charge, both ways', () => {
    const records = memoryDrift(
      [
        { pid: 10, usedGpuMemoryBytes: 700 * MiB },
        { pid: 11, usedGpuMemoryBytes: 300 * MiB },
        { pid: 20, usedGpuMemoryBytes: 100 * MiB },
        { pid: 99, usedGpuMemoryBytes: 4000 * MiB }, // a host process: no container
        { pid: 30, usedGpuMemoryBytes: 900 * MiB }, // a container not placed on this card
      ],
      owner({ 10: 'a', 11: 'a', 20: 'b', 30: 'elsewhere' }),
      [
        { key: 'a', chargedBytes: 600 * MiB },
        { key: 'b', chargedBytes: 400 * MiB },
        { key: 'idle', chargedBytes: 300 * MiB },
      ],
    );
    expect(records).toEqual([
      { key: 'a', nvmlUsedBytes: 1000 * MiB, chargedBytes: 600 * MiB, driftBytes: 400 * MiB, pids: [10, 11] },
      { key: 'b', nvmlUsedBytes: 100 * MiB, chargedBytes: 400 * MiB, driftBytes: -300 * MiB, pids: [20] },
      // Charged, but no process of it holds memory on the card (a stale charge): negative drift.
      { key: 'idle', nvmlUsedBytes: 0, chargedBytes: 300 * MiB, driftBytes: -300 * MiB, pids: [] },
    ]);
  });

  it('leaves out a container with a process whose memory NVML cannot attribute', () => {
    const records = memoryDrift(
      [
        { pid: 10, usedGpuMemoryBytes: 700 * MiB },
        { pid: 11, usedGpuMemoryBytes: null },
        { pid: 12, usedGpuMemoryBytes: 1 * MiB },
      ],
      owner({ 10: 'a', 11: 'a', 12: 'a' }),
      [{ key: 'a', chargedBytes: 0 }],
    );
    expect(records).toEqual([]);
  });
});

describe('nextDriftState', () => {
  const T = 256 * MiB;
  it('enters drift after three reconciliations in a row beyond the threshold, once', () => {
    let state = { overChecks: 0, drifting: false };
    const entered: boolean[] = [];
    for (const d of [T + 1, -(T + 1), T + 1, T + 5, T + 6]) {
      const step = nextDriftState(state, d, T);
      state = step.state;
      entered.push(step.entered);
    }
    expect(entered).toEqual([false, false, true, false, false]);
    expect(state.drifting).toBe(true);
  });

  it('one reconciliation within the threshold starts over; exactly the threshold is within', () => {
    let state = { overChecks: 0, drifting: false };
    for (const d of [T + 1, T + 1, T, T + 1, T + 1]) state = nextDriftState(state, d, T).state;
    expect(state).toEqual({ overChecks: 2, drifting: false });
  });
});

describe('memory drift monitor', () => {
  const target = (key: string, pod: string): DriftTarget => ({
    key,
    namespace: 'ml',
    pod,
    container: 'main',
    cardUuid: 'GPU-x',
    regionPath: `/regions/${key}`,
    deviceIndex: 0,
  });

  function setup() {
    const gpu = new FakeGpuSource({ cards: 1, memoryMiB: 81559 });
    const metrics = new AgentMetrics();
    const { log, lines: warnings } = recordingLog();
    let targets = [target('a', 'pa'), target('b', 'pb')];
    const charged: Record<string, number> = { '/regions/a': 300 * MiB, '/regions/b': 1000 * MiB };
    let now = 0;
    const monitor = createMemoryDriftMonitor({
      cardIndex: 0,
      source: gpu,
      targets: () => targets,
      containerOfPid: owner({ 1: 'a', 2: 'b' }),
      readCharged: (path) => charged[path] ?? 0,
      thresholdBytes: 256 * MiB,
      sink: metrics,
      log,
      nowMs: () => now,
    });
    gpu.processes.set(0, [
      { pid: 1, usedGpuMemoryBytes: 812 * MiB },
      { pid: 2, usedGpuMemoryBytes: 1000 * MiB },
    ]);
    return {
      gpu,
      metrics,
      warnings,
      monitor,
      setTargets: (t: DriftTarget[]) => {
        targets = t;
      },
      advance: (ms: number) => {
        now += ms;
      },
    };
  }

  const series = async (m: AgentMetrics, name: string) =>
    (await m.registry.getSingleMetric(name)?.get())?.values.map((v) => ({ labels: v.labels, value: v.value }));

  it('exports every container drift, counts and logs once the drift is sustained', async () => {
    const s = setup();
    for (let i = 0; i < 5; i++) {
      s.monitor.tick();
      s.monitor.tick(); // within the period: no second reconciliation
      s.advance(1000);
    }
    expect(await series(s.metrics, 'vcuda_container_memory_drift_bytes')).toEqual([
      { labels: { namespace: 'ml', pod: 'pa', container: 'main', card: 'GPU-x' }, value: 512 * MiB },
      { labels: { namespace: 'ml', pod: 'pb', container: 'main', card: 'GPU-x' }, value: 0 },
    ]);
    expect(await series(s.metrics, 'vcuda_container_memory_drift_events_total')).toEqual([
      { labels: { card: 'GPU-x', direction: 'over' }, value: 1 },
    ]);
    expect(s.warnings).toHaveLength(1);
    expect(s.warnings[0]).toContain(
      'ml/pa/main on card GPU-x: NVML 812 MiB (pids 1) vs charged 300 MiB, drift +512 MiB',
    );
  });

  it('logs a container once, counts every new drift, and drops the series of a container that left', async () => {
    const s = setup();
    const run = (n: number) => {
      for (let i = 0; i < n; i++) s.monitor.reconcileOnce();
    };
    run(3);
    s.gpu.processes.set(0, [
      { pid: 1, usedGpuMemoryBytes: 300 * MiB },
      { pid: 2, usedGpuMemoryBytes: 1000 * MiB },
    ]);
    run(1);
    s.gpu.processes.set(0, [{ pid: 2, usedGpuMemoryBytes: 1000 * MiB }]); // a's process gone, its charge not
    run(3);
    expect(await series(s.metrics, 'vcuda_container_memory_drift_events_total')).toEqual([
      { labels: { card: 'GPU-x', direction: 'over' }, value: 1 },
      { labels: { card: 'GPU-x', direction: 'under' }, value: 1 },
    ]);
    expect(s.warnings).toHaveLength(1);
    s.setTargets([target('b', 'pb')]);
    run(1);
    expect((await series(s.metrics, 'vcuda_container_memory_drift_bytes'))?.map((v) => v.labels.pod)).toEqual(['pb']);
  });

  it('exports nothing for a card whose processes NVML cannot list', async () => {
    const s = setup();
    s.monitor.reconcileOnce();
    s.gpu.processes.set(0, null);
    expect(s.monitor.reconcileOnce()).toBeNull();
    expect(await series(s.metrics, 'vcuda_container_memory_drift_bytes')).toEqual([]);
  });

  it("runs on the card sampler's period, even when the sample throws", () => {
    const gpu = new FakeGpuSource({ cards: 1, memoryMiB: 1024 });
    gpu.processUtilization = () => {
      throw new Error('NVML said no');
    };
    let reconciled = 0;
    const errors: unknown[] = [];
    const sampler = createCardSampler({
      cardIndex: 0,
      periodMs: 5,
      source: gpu,
      placement: { containersOn: () => [], containerOfPid: () => null },
      write: () => true,
      nowMs: Date.now,
      alsoEachPeriod: () => reconciled++,
      onError: (err) => errors.push(err),
    });
    sampler.start();
    return new Promise<void>((resolve) =>
      setTimeout(() => {
        sampler.stop();
        expect(reconciled).toBeGreaterThan(0);
        expect(errors.length).toBeGreaterThan(0);
        resolve();
      }, 40),
    );
  });
});
