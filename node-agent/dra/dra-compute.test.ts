/**
 * DRA mode feeds compute back like device-plugin mode: a prepared claim is a container to the card
 * samplers and the host-pid map (the pod it is reserved for owns the processes), so its region gets
 * the pod's host pids and its measured share.
 */
import { mkdtempSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REGION_FILE_SIZE, regionPidMap } from '../../contract/region-layout.js';
import { claim, GiB } from '../../test/support/node-agent/dra-claim.js';
import { startDraHarness } from '../../test/support/node-agent/dra-harness.js';
import type { FakeGpuSource } from '../../test/support/node-agent/fake-gpu-source.js';
import { writeFakeProcess } from '../../test/support/node-agent/fake-proc.js';

const root = mkdtempSync(join(tmpdir(), 'dra-compute-'));
const proc = join(root, 'proc');
afterAll(() => rmSync(root, { recursive: true, force: true }));

const POD = '7c1d2e3f-0000-4000-8000-0000000000aa';

describe('compute feedback in DRA mode', () => {
  it("writes the reserved pod's host pids and its measured share into the claim's region", async () => {
    const h = await startDraHarness({
      paths: { procRoot: proc },
      config: { computePeriodMs: 0, computeSensor: 'nvml' },
    });
    try {
      const c = claim('train')
        .share('gpu-1', 40, 4 * GiB)
        .reservedFor(POD, 'trainer');
      h.api.putClaim(c.obj());
      expect((await h.kubelet.prepare('v1', [c.ref()])).claims[c.uid]?.error).toBe('');
      const [record] = h.agent.preparer.records();
      expect(record).toMatchObject({ podUid: POD, podName: 'trainer', container: 'train' });
      writeFakeProcess(proc, { pid: 6101, podUid: POD, nsPid: 1 });
      truncateSync(record?.paths.regionPath as string, REGION_FILE_SIZE); // as libvcuda sizes it
      expect(h.agent.hostPids.publishOnce()).toBe(1);
      const map = readFileSync(record?.paths.regionPath as string).subarray(regionPidMap.offset);
      expect(map.readUInt32LE(regionPidMap.header.count)).toBe(1);
      expect(map.readUInt32LE(regionPidMap.headerSize)).toBe(6101);

      const gpu = h.gpu as FakeGpuSource;
      gpu.samples.set(1, [{ pid: 6101, timestampUs: (Date.now() + 1000) * 1000, smPercent: 35, memoryPercent: 0 }]);
      const shares = h.agent.samplers[1]?.sampleOnce();
      expect(shares?.byContainer.get(`${POD}/train`)).toBe(3500);
    } finally {
      await h.close();
    }
  });
});
