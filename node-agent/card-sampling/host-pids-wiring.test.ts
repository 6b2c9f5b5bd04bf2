/**
 * The node agent, assembled, publishes each GPU container's host pids into that container's
 * region: a pod is bound and allocated through the real device-plugin path, its processes appear
 * in a /proc of fixtures, and one publication lands in each region at the pinned offsets.
 */
import { mkdtempSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { REGION_FILE_SIZE, regionPidMap } from '../../contract/region-layout.js';
import { type Harness, runPod, startHarness } from '../../test/support/node-agent/agent-harness.js';
import { writeFakeProcess } from '../../test/support/node-agent/fake-proc.js';
import { GpuPodBuilder } from '../../test/support/node-agent/gpu-pod.js';

const root = mkdtempSync(join(tmpdir(), 'vcuda-host-pids-'));
const proc = join(root, 'proc');
afterAll(() => rmSync(root, { recursive: true, force: true }));
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const UID = '2b3c4d5e-0000-4000-8000-00000000beef';
const MAIN_ID = 'e'.repeat(64);
const SIDE_ID = 'f'.repeat(64);

function entriesOf(regionPath: string): number[][] {
  const buf = readFileSync(regionPath).subarray(regionPidMap.offset);
  const count = buf.readUInt32LE(regionPidMap.header.count);
  return Array.from({ length: count }, (_, j) => {
    const at = regionPidMap.headerSize + regionPidMap.entrySize * j;
    return [buf.readUInt32LE(at), buf.readUInt32LE(at + 4), Number(buf.readBigUInt64LE(at + 8))];
  });
}

describe('host-pid map wiring', () => {
  it("writes each container's host pids, with container pids, into that container's region only", async () => {
    // `paths` replaces the harness's whole paths object: keep every file under the temp dir.
    const paths = {
      procRoot: proc,
      containersDir: join(proc, '..', `${UID}-containers`),
      preloadHostPath: join(proc, '..', `${UID}-ld.so.preload`),
      libvcudaHostPath: join(proc, '..', `${UID}-libvcuda.so`),
      driverLibraries: [],
    };
    h = await startHarness({ config: { paths } });
    await h.kubelet.waitFor(() => h?.kubelet.devices(h.names.core).length === 200, 'plugins');
    const card0 = h.agent.health.list()[0]?.uuid as string;
    const pod = new GpuPodBuilder(h.names, 'pidns', UID).container('main', 30, 100).container('side', 20, 100);
    await runPod(h, pod, [[card0], [card0]], { main: MAIN_ID, side: SIDE_ID });
    writeFakeProcess(proc, { pid: 5101, podUid: UID, containerId: MAIN_ID, nsPid: 1, startTicks: 900 });
    writeFakeProcess(proc, { pid: 5102, podUid: UID, containerId: MAIN_ID, nsPid: 12, startTicks: 950 });
    writeFakeProcess(proc, { pid: 5201, podUid: UID, containerId: SIDE_ID, nsPid: 1, startTicks: 990 });
    writeFakeProcess(proc, { pid: 5301, podUid: UID, containerId: 'a'.repeat(64), nsPid: 1, startTicks: 999 }); // same pod uid, a container the pod does not name

    const records = h.agent.allocator.records();
    const region = (name: string) => records.find((r) => r.container === name)?.paths.regionPath as string;
    // Before any process of the container sized the region, nothing is written.
    expect(h.agent.hostPids.publishOnce()).toBe(0);
    // libvcuda sizes the region when the container's first process attaches.
    for (const r of records) truncateSync(r.paths.regionPath, REGION_FILE_SIZE);
    expect(h.agent.hostPids.publishOnce()).toBe(2);
    expect(entriesOf(region('main'))).toEqual([
      [5101, 1, 900],
      [5102, 12, 950],
    ]);
    expect(entriesOf(region('side'))).toEqual([[5201, 1, 990]]);
  });
});
