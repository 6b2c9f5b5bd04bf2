/**
 * The DRA plugin over its real unix sockets, dialled by @grpc/grpc-js clients built from the
 * project's protos as the kubelet would: registration, Prepare / Unprepare in v1 and v1beta1,
 * idempotency, a restart that keeps its prepared claims, a forged claim refused; and the node's
 * ResourceSlice following card health.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeLimitConfig } from '../../contract/index.js';
import { claim, GiB } from '../../test/support/node-agent/dra-claim.js';
import { type DraHarness, startDraHarness } from '../../test/support/node-agent/dra-harness.js';
import type { FakeGpuSource } from '../../test/support/node-agent/fake-gpu-source.js';
import { containerPaths } from '../limits/container-files.js';
import { claimCdiSpecPath } from './claim-cdi.js';
import { claimKey } from './claim-preparer.js';

let h: DraHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const filesOf = (harness: DraHarness, uid: string) => {
  const prepared = harness.agent.preparer.prepared().find((c) => c.uid === uid);
  if (!prepared) return undefined;
  return {
    paths: containerPaths(harness.config.paths.containersDir, prepared.key),
    cdi: claimCdiSpecPath(harness.config.paths.cdiSpecDir, harness.agent.driver, prepared.key),
  };
};

describe('DRA kubelet plugin', () => {
  it('registers as a DRA driver of both DRAPlugin versions', async () => {
    h = await startDraHarness();
    expect(h.agent.healthProblems()).toEqual(['dra-plugin: not registered with the kubelet']);
    const info = await h.kubelet.register();
    expect(info).toEqual({
      type: 'DRAPlugin',
      name: 'gpu.vcuda.io',
      endpoint: h.agent.server.draSocket,
      supported_versions: ['v1.DRAPlugin', 'v1beta1.DRAPlugin'],
    });
    expect(h.agent.server.registrationSocket.endsWith('/reg/gpu.vcuda.io-reg.sock')).toBe(true);
    expect(h.agent.healthProblems()).toEqual([]);
  });

  it.each(['v1', 'v1beta1'] as const)(
    '%s: Prepare writes the limit file, region and CDI spec; both calls are idempotent',
    async (version) => {
      h = await startDraHarness();
      const c = claim('share')
        .share('gpu-1', 30, 8 * GiB)
        .reservedFor('pod-uid-1');
      h.api.putClaim(c.obj());
      const first = await h.kubelet.prepare(version, [c.ref()]);
      const key = h.agent.preparer.prepared()[0]?.key;
      expect(first.claims[c.uid]).toEqual({
        error: '',
        devices: [
          {
            request_names: ['gpu0'],
            pool_name: 'node-1',
            device_name: 'gpu-1',
            cdi_device_ids: [`gpu.vcuda.io/claim=${key}-gpu-1`],
          },
        ],
      });
      const files = filesOf(h, c.uid);
      const limit = decodeLimitConfig(readFileSync(files?.paths.configPath as string));
      const card = h.gpu.listCards()[1];
      expect(limit).toMatchObject({ podUid: 'pod-uid-1', containerName: 'share', regionPath: '/run/vcuda/region' });
      expect(limit.devices).toEqual([
        { uuid: card?.uuid, hostIndex: 1, mode: 'hard', memoryLimitBytes: 8 * GiB, coreRequest: 30, coreLimit: 30 },
      ]);
      expect(existsSync(files?.paths.regionPath as string)).toBe(true);
      const spec = JSON.parse(readFileSync(files?.cdi as string, 'utf8'));
      expect(spec.kind).toBe('gpu.vcuda.io/claim');
      expect(spec.devices).toEqual([
        { name: `${key}-gpu-1`, containerEdits: { deviceNodes: [expect.objectContaining({ path: '/dev/nvidia1' })] } },
      ]);
      expect(spec.containerEdits.env).toEqual(
        expect.arrayContaining(['VCUDA_CONFIG=/etc/vcuda/vcuda.conf', `NVIDIA_VISIBLE_DEVICES=${card?.uuid}`]),
      );
      expect(spec.containerEdits.mounts).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            containerPath: '/etc/ld.so.preload',
            hostPath: h.config.paths.preloadHostPath,
            options: expect.arrayContaining(['ro']),
          }),
          expect.objectContaining({
            containerPath: '/etc/vcuda',
            hostPath: files?.paths.configDir,
            options: expect.arrayContaining(['ro']),
          }),
          expect.objectContaining({
            containerPath: '/run/vcuda',
            hostPath: files?.paths.runDir,
            options: expect.arrayContaining(['rw']),
          }),
        ]),
      );

      const written = readFileSync(files?.paths.configPath as string);
      h.api.claims.clear(); // a second Prepare answers from the checkpoint, without the API server
      expect(await h.kubelet.prepare(version, [c.ref()])).toEqual(first);
      expect(readFileSync(files?.paths.configPath as string)).toEqual(written);

      expect(await h.kubelet.unprepare(version, [c.ref()])).toEqual({ claims: { [c.uid]: { error: '' } } });
      expect(existsSync(files?.paths.dir as string)).toBe(false);
      expect(existsSync(files?.cdi as string)).toBe(false);
      expect(h.agent.preparer.prepared()).toEqual([]);
      expect(await h.kubelet.unprepare(version, [c.ref()])).toEqual({ claims: { [c.uid]: { error: '' } } });
    },
  );

  it('a restarted agent keeps its prepared claims and unprepares them', async () => {
    h = await startDraHarness();
    const a = claim('a').share('gpu-0', 50, 10 * GiB);
    const b = claim('b').share('gpu-0', 50, 10 * GiB);
    h.api.putClaim(a.obj());
    h.api.putClaim(b.obj());
    await h.kubelet.prepare('v1', [a.ref(), b.ref()]);
    const files = filesOf(h, a.uid);
    h = await h.restart();
    expect(
      h.agent.preparer
        .prepared()
        .map((c) => c.name)
        .sort(),
    ).toEqual(['a', 'b']);
    // The card is full after the restart too: a third share is refused.
    const c = claim('c').share('gpu-0', 10, GiB);
    h.api.putClaim(c.obj());
    expect((await h.kubelet.prepare('v1', [c.ref()])).claims[c.uid]?.error).toMatch(/would overcommit card/);
    expect((await h.kubelet.unprepare('v1beta1', [a.ref()])).claims[a.uid]).toEqual({ error: '' });
    expect(existsSync(files?.paths.dir as string)).toBe(false);
    expect(h.agent.preparer.prepared().map((x) => x.name)).toEqual(['b']);
  });

  it('a burst of claims shares one checkpoint write, answered only once it is on disk', async () => {
    h = await startDraHarness();
    const claims = Array.from({ length: 10 }, (_, i) => claim(`burst-${i}`).share(`gpu-${i % 2}`, 10, GiB));
    for (const c of claims) h.api.putClaim(c.obj());
    const before = h.agent.checkpoint.writes;
    const res = await h.kubelet.prepare(
      'v1',
      claims.map((c) => c.ref()),
    );
    expect(Object.values(res.claims).map((r) => r.error)).toEqual(Array(10).fill(''));
    expect(h.agent.checkpoint.writes - before).toBeLessThanOrEqual(2);
    h = await h.restart();
    expect(h.agent.preparer.prepared()).toHaveLength(10);
  });

  it('a restarted agent removes claim folders no checkpointed claim names, and nothing else', async () => {
    h = await startDraHarness();
    const kept = claim('kept').share('gpu-0', 10, GiB);
    h.api.putClaim(kept.obj());
    await h.kubelet.prepare('v1', [kept.ref()]);
    const { containersDir, cdiSpecDir } = h.config.paths;
    const orphan = claimKey('lost-uid');
    mkdirSync(join(containersDir, orphan, 'etc'), { recursive: true });
    writeFileSync(claimCdiSpecPath(cdiSpecDir, 'gpu.vcuda.io', orphan), '{}');
    mkdirSync(join(containersDir, 'a0123456789abcdef0123456789abcdef'), { recursive: true }); // a device-plugin allocation
    h = await h.restart();
    expect(readdirSync(containersDir).sort()).toEqual(
      ['a0123456789abcdef0123456789abcdef', h.agent.preparer.prepared()[0]?.key].sort(),
    );
    expect(existsSync(claimCdiSpecPath(cdiSpecDir, 'gpu.vcuda.io', orphan))).toBe(false);
  });

  it('refuses a forged claim at Prepare and leaves nothing behind', async () => {
    h = await startDraHarness();
    const forged = claim('forged').share('gpu-7', 30, GiB);
    const wrongNode = claim('elsewhere', { pool: 'node-2' }).share('gpu-0', 30, GiB);
    const good = claim('good').share('gpu-0', 30, GiB);
    for (const c of [forged, wrongNode, good]) h.api.putClaim(c.obj());
    const res = await h.kubelet.prepare('v1', [
      forged.ref(),
      { ...good.ref(), uid: 'stale-uid' },
      wrongNode.ref(),
      good.ref(),
    ]);
    expect(res.claims[forged.uid]?.error).toMatch(
      /claim default\/forged .*device that is not in this node's ResourceSlice; refusing it/,
    );
    expect(res.claims['stale-uid']?.error).toMatch(/the API server has uid .* under that name/);
    expect(res.claims[wrongNode.uid]?.error).toMatch(/names pool node-2, not this node's \(node-1\)/);
    expect(res.claims[good.uid]?.error).toBe('');
    expect(h.agent.preparer.prepared().map((c) => c.name)).toEqual(['good']);
    const missing = claim('missing');
    expect((await h.kubelet.prepare('v1', [missing.ref()])).claims[missing.uid]?.error).toMatch(/not found/);
  });
});

describe('the node ResourceSlice', () => {
  it('is published at start and republished with the next generation when a card turns unhealthy', async () => {
    h = await startDraHarness();
    const slice = () => h?.api.slices.get('node-1-gpu.vcuda.io');
    expect(slice()?.spec.pool.generation).toBe(1);
    expect(slice()?.metadata.ownerReferences?.[0]?.uid).toBe('node-1-uid');
    expect(await h.agent.publishSlices()).toBe(false); // unchanged: no write
    (h.gpu as FakeGpuSource).emit({ cardIndex: 1, kind: 'xid', xid: 79 });
    await expect.poll(() => slice()?.spec.pool.generation, { timeout: 5000 }).toBe(2);
    expect(slice()?.spec.devices?.[1]?.taints).toEqual([
      { key: 'gpu.vcuda.io/unhealthy', value: 'Xid-79', effect: 'NoSchedule' },
    ]);
    // A claim on the sick card is refused.
    const c = claim('sick').share('gpu-1', 10, GiB);
    h.api.putClaim(c.obj());
    expect((await h.kubelet.prepare('v1', [c.ref()])).claims[c.uid]?.error).toMatch(/is unhealthy/);
    // A restarted agent continues above the generation it finds.
    h = await h.restart();
    expect(slice()?.spec.pool.generation).toBe(3);
  });
});
