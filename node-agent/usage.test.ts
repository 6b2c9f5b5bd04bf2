import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { regionDeviceOffset, regionOffsets } from '../contract/index.js';
import type { ContainerRecord } from './allocation/ports.js';
import { regionCharge } from './card-sampling/placement.js';
import { allocationKey, containerPaths } from './limits/container-files.js';
import { ensureRegionFile, readRegionUsage } from './limits/region-file.js';
import { collectUsage, HttpUsageSink, reportedUsage, tokenFromFile } from './usage.js';

const root = mkdtempSync(join(tmpdir(), 'vcuda-usage-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function record(podUid = 'pod-1'): ContainerRecord {
  // One allocation per pod: its devices are the pod's own.
  const paths = containerPaths(root, allocationKey([`${podUid}-c0-00`]));
  mkdirSync(paths.runDir, { recursive: true });
  return {
    podUid,
    namespace: 'ns',
    podName: 'p',
    container: 'main',
    isInit: false,
    deviceIds: [`${podUid}-c0-00`],
    devices: [
      { uuid: 'GPU-a', hostIndex: 0, mode: 'hard', memoryLimitBytes: 1000, coreRequest: 30, coreLimit: 30 },
      { uuid: 'GPU-b', hostIndex: 1, mode: 'soft', memoryLimitBytes: 2000, coreRequest: 30, coreLimit: 60 },
    ],
    paths,
    allocatedAtMs: 0,
    confirmed: true,
  };
}

describe('usage from regions', () => {
  it('creates a region once and never overwrites a live one', () => {
    const r = record();
    expect(ensureRegionFile(r.paths.regionPath, 2)).toBe(true);
    const fd = openSync(r.paths.regionPath, 'r+');
    const used = Buffer.alloc(8);
    used.writeBigUInt64LE(777n);
    writeSync(fd, used, 0, 8, regionDeviceOffset(1) + regionOffsets.device.usedBytes);
    const share = Buffer.alloc(4);
    share.writeUInt32LE(2500);
    writeSync(fd, share, 0, 4, regionDeviceOffset(1) + regionOffsets.device.measuredShareBp);
    const sampledAt = Buffer.alloc(8);
    sampledAt.writeBigUInt64LE(1_700_000_000_000n);
    writeSync(fd, sampledAt, 0, 8, regionDeviceOffset(1) + regionOffsets.device.sampleTimeMs);
    closeSync(fd);
    expect(ensureRegionFile(r.paths.regionPath, 2)).toBe(false);
    expect(readRegionUsage(r.paths.regionPath, 2)?.[1]).toEqual({
      usedBytes: 777,
      burstBytes: 0,
      burstEvictedBytes: 0,
      burstEvictions: 0,
      measuredShareBp: 2500,
      cardBusyBp: 0,
      sampleTimeMs: 1_700_000_000_000,
    });
    const samples = collectUsage([r]);
    expect(samples.map((s) => [s.cardUuid, s.memoryUsedBytes, s.memoryLimitBytes, s.smShare])).toEqual([
      ['GPU-a', 0, 1000, null],
      ['GPU-b', 777, 2000, 0.25],
    ]);
  });

  it("reports a pod's container under its own keys, and a claim's budget under the ledger's holder, per share", () => {
    const pod = record('pod-shares');
    ensureRegionFile(pod.paths.regionPath, 2);
    const fd = openSync(pod.paths.regionPath, 'r+');
    const sampled = Buffer.alloc(8);
    sampled.writeBigUInt64LE(1_700_000_000_000n);
    writeSync(fd, sampled, 0, 8, regionDeviceOffset(0) + regionOffsets.device.sampleTimeMs);
    const share = Buffer.alloc(4);
    share.writeUInt32LE(3000);
    writeSync(fd, share, 0, 4, regionDeviceOffset(0) + regionOffsets.device.measuredShareBp);
    closeSync(fd);
    expect(reportedUsage([pod])).toEqual(collectUsage([pod]));
    // The same budget as a claim's: 20 + 10 cores on GPU-a; GPU-b holds none of its shares.
    const shares = [
      { key: 'gpu/s1', cardUuid: 'GPU-a', cores: 20, memoryBytes: 600 },
      { key: 'gpu/s2', cardUuid: 'GPU-a', cores: 10, memoryBytes: 400 },
    ];
    const asClaim = { ...pod, ledgerHolder: { id: 'claim:u-1', name: 'train', shares } };
    expect(reportedUsage([asClaim]).map((s) => [s.podUid, s.pod, s.container, s.cardUuid, s.smShare])).toEqual([
      ['claim:u-1', 'train', 'gpu/s1', 'GPU-a', 0.2],
      ['claim:u-1', 'train', 'gpu/s2', 'GPU-a', 0.1],
    ]);
  });

  it('reports a measured idle container as share 0, and an unmeasured one as no figure', () => {
    const r = record('pod-idle');
    ensureRegionFile(r.paths.regionPath, 2);
    const fd = openSync(r.paths.regionPath, 'r+');
    const sampledAt = Buffer.alloc(8);
    sampledAt.writeBigUInt64LE(1_700_000_000_000n);
    writeSync(fd, sampledAt, 0, 8, regionDeviceOffset(0) + regionOffsets.device.sampleTimeMs);
    closeSync(fd);
    expect(collectUsage([r]).map((s) => s.smShare)).toEqual([0, null]);
  });

  it('reads what libvcuda records of a burst: burst bytes, evicted bytes, evictions', () => {
    const r = record('pod-burst');
    ensureRegionFile(r.paths.regionPath, 2);
    const fd = openSync(r.paths.regionPath, 'r+');
    const put = (offset: number, value: bigint) => {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(value);
      writeSync(fd, b, 0, 8, regionDeviceOffset(1) + offset);
    };
    put(regionOffsets.device.burstBytes, 3n << 30n);
    put(regionOffsets.device.burstEvictedBytes, 1n << 30n);
    put(regionOffsets.device.burstEvictions, 4n);
    closeSync(fd);
    const b = collectUsage([r])[1];
    expect([b?.memoryBurstBytes, b?.memoryBurstEvictedBytes, b?.memoryBurstEvictions]).toEqual([
      3 * 2 ** 30,
      2 ** 30,
      4,
    ]);
    expect(collectUsage([r])[0]?.memoryBurstBytes).toBe(0);
    // The drift monitor compares NVML with what is on the card: the burst, less what is on the host.
    expect(regionCharge(r.paths.regionPath, 1)).toBe(2 * 2 ** 30);
  });

  it('reports a missing region as zero use, not a crash', () => {
    expect(readRegionUsage(join(root, 'nope'), 1)).toBeUndefined();
  });

  it('posts samples to the control plane, and tolerates an endpoint that does not exist yet', async () => {
    const seen: { url: string; body: unknown }[] = [];
    const fetchFn = (async (url: URL, init: RequestInit) => {
      seen.push({ url: String(url), body: JSON.parse(String(init.body)) });
      return new Response('', { status: seen.length === 1 ? 404 : 500 });
    }) as unknown as typeof fetch;
    const sink = new HttpUsageSink('http://cp.example:8080', { fetchFn });
    await sink.report('n1', [], new Date(0), 10);
    await expect(sink.report('n1', [], new Date(0), 10)).rejects.toThrow(/HTTP 500/);
    expect(seen[0]).toEqual({
      url: 'http://cp.example:8080/api/v1/usage',
      body: { node: 'n1', at: '1970-01-01T00:00:00.000Z', periodS: 10, samples: [] },
    });
  });

  it("sends the token file's current content, and passes on why the control plane refused", async () => {
    const tokenFile = join(root, 'token');
    const headers: (string | null)[] = [];
    const fetchFn = (async (_url: URL, init: RequestInit) => {
      headers.push(new Headers(init.headers).get('authorization'));
      const error = { code: 'forbidden', message: 'POST /api/v1/usage: system:serviceaccount:x:y may not do this' };
      return Response.json({ error }, { status: 403 });
    }) as unknown as typeof fetch;
    const sink = new HttpUsageSink('http://cp.example:8080', { fetchFn, token: tokenFromFile(tokenFile) });
    await expect(sink.report('n1', [], new Date(0), 10)).rejects.toThrow(/HTTP 403 .*x:y may not do this/);
    writeFileSync(tokenFile, 'first\n');
    await sink.report('n1', [], new Date(0), 10).catch(() => undefined);
    writeFileSync(tokenFile, 'rotated');
    await sink.report('n1', [], new Date(0), 10).catch(() => undefined);
    expect(headers).toEqual([null, 'Bearer first', 'Bearer rotated']);
  });
});
