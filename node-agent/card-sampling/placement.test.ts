import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { REGION_FILE_SIZE, regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import { type Harness, runPod, startHarness } from '../../test/support/node-agent/agent-harness.js';
import { GpuPodBuilder } from '../../test/support/node-agent/gpu-pod.js';
import { readRegionUsage } from '../limits/region-file.js';

const proc = mkdtempSync(join(tmpdir(), 'vcuda-proc-'));
afterAll(() => rmSync(proc, { recursive: true, force: true }));
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const UID = '1a2b3c4d-0000-4000-8000-00000000abcd';
const MAIN_ID = 'a'.repeat(64);
const SIDE_ID = 'b'.repeat(64);

function fakeProcess(pid: number, containerId: string) {
  mkdirSync(join(proc, String(pid)), { recursive: true });
  const slice = `kubepods-burstable-pod${UID.replace(/-/g, '_')}.slice`;
  writeFileSync(join(proc, String(pid), 'cgroup'), `0::/kubepods.slice/${slice}/cri-containerd-${containerId}.scope\n`);
}

function writeBusyNs(regionPath: string, ns: bigint): void {
  const buf = Buffer.alloc(8);
  buf.writeBigUInt64LE(ns);
  const fd = openSync(regionPath, 'r+');
  writeSync(fd, buf, 0, 8, regionDeviceOffset(0) + regionOffsets.device.busyNs);
  closeSync(fd);
}

describe('compute feedback wiring', () => {
  it("with computeSensor in-process turns each container's busy time into its share of the card, in its region", async () => {
    h = await startHarness({ config: { paths: { procRoot: proc }, computeSensor: 'in-process' } });
    await h.kubelet.waitFor(() => h?.kubelet.devices(h.names.core).length === 200, 'plugins');
    const card0 = h.agent.health.list()[0]?.uuid as string;
    const pod = new GpuPodBuilder(h.names, 'cmp', UID).container('main', 30, 100).container('side', 20, 100);
    await runPod(h, pod, [[card0], [card0]], { main: MAIN_ID, side: SIDE_ID });
    const records = h.agent.allocator.records();
    const region = (name: string) => records.find((x) => x.container === name)?.paths.regionPath as string;
    // NVML offers per-process figures too; the in-process sensor ignores them.
    h.gpu.samples.set(0, [{ pid: 4242, timestampUs: h.nowMs.value * 1000, smPercent: 90, memoryPercent: 0 }]);
    for (const name of ['main', 'side']) {
      truncateSync(region(name), REGION_FILE_SIZE); // as libvcuda sizes it
      writeBusyNs(region(name), 1_000_000n);
    }
    h.nowMs.value += 200;
    h.agent.samplers[0]?.sampleOnce(); // baselines
    h.nowMs.value += 200;
    writeBusyNs(region('main'), 1_000_000n + 60_000_000n); // 60 ms busy in 200 ms
    writeBusyNs(region('side'), 1_000_000n + 20_000_000n);
    h.agent.samplers[0]?.sampleOnce();
    const share = (name: string) => readRegionUsage(region(name), 1)?.[0]?.measuredShareBp;
    expect(share('main')).toBe(3000);
    expect(share('side')).toBe(1000);
  });

  it("with computeSensor in-process measures a whole card's holder with NVML: libvcuda does not time unlimited launches", async () => {
    h = await startHarness({ config: { paths: { procRoot: proc }, computeSensor: 'in-process' } });
    await h.kubelet.waitFor(() => h?.kubelet.devices(h.names.core).length === 200, 'plugins');
    const card0 = h.agent.health.list()[0]?.uuid as string;
    const pod = new GpuPodBuilder(h.names, 'whole', UID).container('main', 100, 0);
    await runPod(h, pod, [[card0]], { main: MAIN_ID });
    fakeProcess(4242, MAIN_ID);
    const t0 = h.nowMs.value * 1000;
    h.gpu.samples.set(0, [{ pid: 4242, timestampUs: t0 + 50_000, smPercent: 64, memoryPercent: 0 }]);
    h.gpu.rates.set(0, { gpuPercent: 64, memoryPercent: 0 });
    h.agent.samplers[0]?.sampleOnce();
    const region = h.agent.allocator.records()[0]?.paths.regionPath as string;
    expect(readRegionUsage(region, 1)?.[0]?.measuredShareBp).toBe(6400);
  });

  it("with computeSensor nvml writes each container's NVML share of its card into that container's region", async () => {
    h = await startHarness({ config: { paths: { procRoot: proc }, computeSensor: 'nvml' } });
    await h.kubelet.waitFor(() => h?.kubelet.devices(h.names.core).length === 200, 'plugins');
    const card0 = h.agent.health.list()[0]?.uuid as string;
    const pod = new GpuPodBuilder(h.names, 'cmp', UID).container('main', 30, 100).container('side', 20, 100);
    await runPod(h, pod, [[card0], [card0]], { main: MAIN_ID, side: SIDE_ID });
    fakeProcess(4242, MAIN_ID);
    fakeProcess(4343, SIDE_ID);
    const t0 = h.nowMs.value * 1000;
    h.gpu.samples.set(0, [
      { pid: 4242, timestampUs: t0 + 50_000, smPercent: 30, memoryPercent: 0 },
      { pid: 4343, timestampUs: t0 + 50_000, smPercent: 10, memoryPercent: 0 },
      { pid: 999, timestampUs: t0 + 50_000, smPercent: 20, memoryPercent: 0 },
    ]);
    h.gpu.rates.set(0, { gpuPercent: 60, memoryPercent: 0 });
    h.agent.samplers[0]?.sampleOnce();
    const records = h.agent.allocator.records();
    const share = (name: string) => {
      const r = records.find((x) => x.container === name);
      return readRegionUsage(r?.paths.regionPath as string, 1)?.[0]?.measuredShareBp;
    };
    expect(share('main')).toBe(3000);
    expect(share('side')).toBe(1000);
  });

  it('stops measuring a pod the API server deleted, though its record waits for housekeeping', async () => {
    h = await startHarness({ config: { paths: { procRoot: proc }, computeSensor: 'nvml' } });
    await h.kubelet.waitFor(() => h?.kubelet.devices(h.names.core).length === 200, 'plugins');
    const card0 = h.agent.health.list()[0]?.uuid as string;
    const pod = new GpuPodBuilder(h.names, 'gone', UID).container('main', 30, 100);
    await runPod(h, pod, [[card0]], { main: MAIN_ID });
    fakeProcess(4242, MAIN_ID);
    const region = h.agent.allocator.records()[0]?.paths.regionPath as string;
    const measure = (smPercent: number) => {
      h!.nowMs.value += 200;
      const at = h!.nowMs.value * 1000;
      h!.gpu.samples.set(0, [{ pid: 4242, timestampUs: at - 50_000, smPercent, memoryPercent: 0 }]);
      h!.gpu.rates.set(0, { gpuPercent: smPercent, memoryPercent: 0 });
      h!.agent.samplers[0]?.sampleOnce();
      return readRegionUsage(region, 1)?.[0]?.measuredShareBp;
    };
    expect(measure(30)).toBe(3000);
    h.cluster.delete('default', 'gone');
    expect(h.agent.allocator.records()).toHaveLength(1);
    // Its region keeps the last sample: nothing runs there to measure.
    expect(measure(70)).toBe(3000);
  });

  it("exports each container's NVML memory minus its region's charge, labelled by pod and card", async () => {
    h = await startHarness({ config: { paths: { procRoot: proc } } });
    await h.kubelet.waitFor(() => h?.kubelet.devices(h.names.core).length === 200, 'plugins');
    const card0 = h.agent.health.list()[0]?.uuid as string;
    const pod = new GpuPodBuilder(h.names, 'mem', UID).container('main', 30, 100);
    await h.bind(pod, [[card0]]);
    await h.kubelet.admitPod(pod.kubelet(false));
    fakeProcess(5151, MAIN_ID);
    const region = h.agent.allocator.records()[0]?.paths.regionPath as string;
    // What libvcuda would have charged on the container's first device: 812 MiB.
    const used = Buffer.alloc(8);
    used.writeBigUInt64LE(812n << 20n);
    const fd = openSync(region, 'r+');
    writeSync(fd, used, 0, 8, regionDeviceOffset(0));
    closeSync(fd);
    h.gpu.processes.set(0, [
      { pid: 5151, usedGpuMemoryBytes: 1012 * 2 ** 20 },
      { pid: 999, usedGpuMemoryBytes: 4096 * 2 ** 20 }, // a host process
    ]);
    expect(h.agent.driftMonitors[0]?.reconcileOnce()).toEqual([
      expect.objectContaining({ driftBytes: 200 * 2 ** 20, pids: [5151] }),
    ]);
    const drift = await h.agent.metrics.registry.getSingleMetric('vcuda_container_memory_drift_bytes')?.get();
    expect(drift?.values).toEqual([
      { labels: { namespace: 'default', pod: 'mem', container: 'main', card: card0 }, value: 200 * 2 ** 20 },
    ]);
  });
});
