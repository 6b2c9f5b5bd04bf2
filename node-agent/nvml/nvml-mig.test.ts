/**
 * MIG discovery through koffi over native/'s fake NVML: mode per card, the H100 80GB profile table
 * with its placements, and the instances fakegpu-ctl made (profile, placement, MIG- UUID, memory,
 * SMs), read afresh at every call; a library without the MIG exports reports no MIG.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { NvmlGpuSource } from './nvml-gpu-source.js';

const here = dirname(fileURLToPath(import.meta.url));
const fakeNvml = join(here, '../../native/build/fake/libnvidia-ml.so.1');
const fakeCtl = join(here, '../../native/build/fake/fakegpu-ctl');
const tmp = mkdtempSync(join(tmpdir(), 'vcuda-nvml-mig-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(!existsSync(fakeNvml) || !existsSync(fakeCtl))("MIG through koffi (native/'s fake NVML)", () => {
  const env = {
    FAKEGPU_DEVICES: '81559,143771,1024',
    FAKEGPU_MIG: '0',
    FAKEGPU_STATE: join(tmp, 'fakegpu.state'),
  };
  const ctl = (...args: string[]) =>
    execFileSync(fakeCtl, args, { env: { ...process.env, ...env }, stdio: 'pipe' })
      .toString()
      .trim();

  function open(): NvmlGpuSource {
    const dir = join(tmp, 'lib');
    mkdirSync(dir, { recursive: true });
    copyFileSync(fakeNvml, join(dir, 'libnvidia-ml.so.1'));
    Object.assign(process.env, env);
    try {
      return new NvmlGpuSource({ libraryPath: join(dir, 'libnvidia-ml.so.1'), sysfsRoot: dir });
    } finally {
      for (const k of Object.keys(env)) delete process.env[k];
    }
  }

  it('reports each card: MIG mode, profiles and placements, existing instances', () => {
    const three = ctl('mig-create', '0', '9', '4').split(' ');
    const small = ctl('mig-create', '0', '15', '0').split(' ');
    const gpu = open();
    try {
      expect(gpu.listCards().map((c) => c.migMode)).toEqual([true, false, undefined]);
      // Out of MIG mode: the profiles the card could offer (H200 141GB), no instance.
      const h200 = gpu.migLayout(1);
      expect(h200?.mode).toBe('disabled');
      expect(h200?.instances).toEqual([]);
      expect(h200?.profiles.map((p) => [p.profile, p.memoryMiB, p.placements.length])).toEqual([
        ['7g.141gb', 143360, 1],
        ['4g.71gb', 71424, 1],
        ['3g.71gb', 71424, 2],
        ['2g.35gb', 33280, 3],
        ['1g.35gb', 33280, 4],
        ['1g.18gb', 16384, 7],
        ['1g.18gb+me', 16384, 7],
      ]);
      expect(gpu.migLayout(2)).toBeNull();
      const layout = gpu.migLayout(0);
      expect(layout?.mode).toBe('enabled');
      expect(
        layout?.profiles.map((p) => [
          p.profileId,
          p.profile,
          p.computeSlices,
          p.memorySlices,
          p.sms,
          p.memoryMiB,
          p.maxInstances,
          p.placements,
        ]),
      ).toEqual([
        [0, '7g.80gb', 7, 8, 132, 81152, 1, [0]],
        [5, '4g.40gb', 4, 4, 64, 40448, 1, [0]],
        [9, '3g.40gb', 3, 4, 60, 40448, 2, [0, 4]],
        [14, '2g.20gb', 2, 2, 32, 20096, 3, [0, 2, 4]],
        [15, '1g.20gb', 1, 2, 26, 20096, 4, [0, 2, 4, 6]],
        [19, '1g.10gb', 1, 1, 16, 9984, 7, [0, 1, 2, 3, 4, 5, 6]],
        [20, '1g.10gb+me', 1, 1, 16, 9984, 1, [0, 1, 2, 3, 4, 5, 6]],
      ]);
      // MIG devices in GPU-instance ID order: the 3g at slice 4 is GI 2, the 1g.20gb at slice 0 GI 3.
      expect(layout?.instances).toEqual([
        {
          uuid: three[1],
          profile: '3g.40gb',
          profileId: 9,
          gpuInstanceId: Number(three[0]),
          computeInstanceId: 0,
          placement: { start: 4, size: 4 },
          memoryMiB: 40448,
          sms: 60,
        },
        {
          uuid: small[1],
          profile: '1g.20gb',
          profileId: 15,
          gpuInstanceId: Number(small[0]),
          computeInstanceId: 0,
          placement: { start: 0, size: 2 },
          memoryMiB: 20096,
          sms: 26,
        },
      ]);
      // Read afresh: an instance made while the agent runs shows at the next read.
      const one = ctl('mig-create', '0', '19', '3').split(' ');
      expect(gpu.migLayout(0)?.instances.map((i) => [i.uuid, i.profile, i.placement.start])).toContainEqual([
        one[1],
        '1g.10gb',
        3,
      ]);
    } finally {
      gpu.close();
    }
  });
});

const stubSource = join(here, 'testdata/stub-nvml.c');

describe.skipIf(!existsSync(stubSource))('MIG through koffi (a library without the MIG exports)', () => {
  it('says the cards have no MIG', () => {
    const out = join(tmp, 'libnvidia-ml-stub.so');
    execFileSync('cc', ['-shared', '-fPIC', '-O1', '-o', out, stubSource], { stdio: 'pipe' });
    const gpu = new NvmlGpuSource({ libraryPath: out, sysfsRoot: tmp });
    try {
      expect(gpu.listCards().every((c) => !('migMode' in c))).toBe(true);
      expect(gpu.migLayout(0)).toBeNull();
    } finally {
      gpu.close();
    }
  });
});
