/**
 * Enforcement through the claim path: the container configuration a DRA Prepare produces (its CDI
 * spec: libvcuda through the read-only preload file, the claim's limit file and region, the driver
 * libraries, the env) runs native/'s memory conformance client over the fake driver, with nothing
 * else set up by hand. `mem_client paths` and `views` hold the same assertions memory_test runs for
 * the device-plugin path: every allocation path succeeds at the limit and fails one byte above with
 * the driver's out-of-memory error, and cuMemGetInfo / cuDeviceTotalMem / NVML show the slice.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { canRunCdiContainers, runInCdiContainer } from '../../test/support/node-agent/cdi-container.js';
import { claim } from '../../test/support/node-agent/dra-claim.js';
import { startDraHarness } from '../../test/support/node-agent/dra-harness.js';
import { NvmlGpuSource } from '../nvml/nvml-gpu-source.js';

const build = join(dirname(fileURLToPath(import.meta.url)), '../../native/build');
const fake = join(build, 'fake');
const client = join(build, 'test/mem_client');
const MiB = 2 ** 20;
const tmp = mkdtempSync(join(tmpdir(), 'dra-native-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const built = [join(fake, 'libnvidia-ml.so.1'), join(fake, 'libcuda.so.1'), join(build, 'libvcuda.so'), client].every(
  existsSync,
);
const namespaces = built && canRunCdiContainers();
const skipped = !built
  ? ' (skipped: make -C native has not run)'
  : !namespaces
    ? ' (skipped: no unprivileged mount namespaces)'
    : '';

describe.skipIf(!namespaces)(`a claim's container on the fake driver${skipped}`, () => {
  it('a 30-core 64 MiB share of card 1: allocation to the limit, then out of memory; the views show the slice', async () => {
    const fakeEnv = { FAKEGPU_DEVICES: '2x1024', FAKEGPU_STATE: join(tmp, 'state') };
    Object.assign(process.env, fakeEnv);
    const h = await startDraHarness({
      gpu: () => new NvmlGpuSource({ libraryPath: join(fake, 'libnvidia-ml.so.1'), sysfsRoot: tmp }),
      paths: {
        libvcudaHostPath: join(build, 'libvcuda.so'),
        driverLibraries: [
          { hostPath: join(fake, 'libcuda.so.1'), containerPath: '/usr/lib/libcuda.so.1' },
          { hostPath: join(fake, 'libnvidia-ml.so.1'), containerPath: '/usr/lib/libnvidia-ml.so.1' },
        ],
      },
    });
    try {
      const c = claim('share')
        .share('gpu-1', 30, 64 * MiB)
        .reservedFor('pod-1');
      h.api.putClaim(c.obj());
      const res = await h.kubelet.prepare('v1', [c.ref()]);
      expect(res.claims[c.uid]?.error).toBe('');
      const key = h.agent.preparer.prepared()[0]?.key as string;
      const spec = JSON.parse(readFileSync(join(h.config.paths.cdiSpecDir, `gpu.vcuda.io-claim-${key}.json`), 'utf8'));
      const card = h.gpu.listCards()[1];
      expect(spec.containerEdits.env).toContain(`CUDA_VISIBLE_DEVICES=${card?.uuid}`);
      const devices = spec.devices.map((d: { containerEdits: object }) => d.containerEdits);
      const knobs = { ...fakeEnv, TEST_LIMIT_MIB: '64', VCUDA_CONTEXT_OVERHEAD_MIB: '0' };
      for (const scenario of ['paths', 'views']) {
        const run = runInCdiContainer(spec.containerEdits, devices, [client, scenario], knobs);
        expect(
          run.stderr.split('\n').filter((l) => l.startsWith('FAIL')),
          `${scenario}: ${run.stderr}`,
        ).toEqual([]);
        expect(run.status, `${scenario}: ${run.stderr}`).toBe(0);
      }
      // Without the claim's limit file the same container gets nothing: the limit is what allowed it.
      const bare = {
        ...spec.containerEdits,
        mounts: spec.containerEdits.mounts.filter((m: { containerPath: string }) => m.containerPath !== '/etc/vcuda'),
      };
      const refused = runInCdiContainer(bare, devices, [client, 'try', '1'], knobs);
      expect(refused.stderr).toMatch(/vcuda: .*limit/);
      expect(refused.status).not.toBe(0);
    } finally {
      await h.close();
      delete process.env['FAKEGPU_DEVICES'];
      delete process.env['FAKEGPU_STATE'];
    }
  });
});
