/**
 * Enforcement through the claim path: the container configuration a DRA Prepare produces (its CDI
 * spec: libvcuda through the read-only preload file, the claim's limit file and region, the driver
 * libraries, the env) runs native/'s conformance checks over the fake driver, with nothing else set
 * up by hand. `mem_client paths` and `views` hold the assertions memory_test runs for the
 * device-plugin path (every allocation path succeeds at the limit and fails one byte above with
 * the driver's out-of-memory error; cuMemGetInfo, cuDeviceTotalMem and NVML show the slice), and
 * test/support/native/cudart-checks.ts those cudart.test runs with NVIDIA's CUDA runtime.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CudartRuntime,
  caseOf,
  conformanceBinary,
  expectFillsToLimit,
  expectSeesLimit,
  FILL_KINDS,
} from '../../test/support/native/cudart-checks.js';
import { type CdiEdits, canRunCdiContainers, runInCdiContainer } from '../../test/support/node-agent/cdi-container.js';
import { claim } from '../../test/support/node-agent/dra-claim.js';
import { startDraHarness } from '../../test/support/node-agent/dra-harness.js';
import { NvmlGpuSource } from '../nvml/nvml-gpu-source.js';

const native = join(dirname(fileURLToPath(import.meta.url)), '../../native');
const build = join(native, 'build');
const fake = join(build, 'fake');
const client = join(build, 'test/mem_client');
const nvcc = '/usr/local/cuda/bin/nvcc';
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

type ClaimContainer = {
  edits: CdiEdits;
  devices: CdiEdits[];
  cardUuid: string;
  /** Runs argv in the claim's container over the fake driver (`knobs`: test-only env of the clients). */
  run: (argv: string[], knobs?: Record<string, string>) => ReturnType<typeof runInCdiContainer>;
  close: () => Promise<void>;
};

/** A share of card 1 prepared through the DRA plugin, and a runner for its container. */
async function claimContainer(cores: number, memoryMiB: number): Promise<ClaimContainer> {
  const fakeEnv = { FAKEGPU_DEVICES: '2x1024', FAKEGPU_STATE: join(tmp, `state-${cores}-${memoryMiB}`) };
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
  const close = async () => {
    await h.close();
    delete process.env['FAKEGPU_DEVICES'];
    delete process.env['FAKEGPU_STATE'];
  };
  try {
    const c = claim('share')
      .share('gpu-1', cores, memoryMiB * MiB)
      .reservedFor('pod-1');
    h.api.putClaim(c.obj());
    const res = await h.kubelet.prepare('v1', [c.ref()]);
    expect(res.claims[c.uid]?.error).toBe('');
    const key = h.agent.preparer.prepared()[0]?.key as string;
    const spec = JSON.parse(readFileSync(join(h.config.paths.cdiSpecDir, `gpu.vcuda.io-claim-${key}.json`), 'utf8'));
    const edits = spec.containerEdits as CdiEdits;
    const devices = (spec.devices as { containerEdits: CdiEdits }[]).map((d) => d.containerEdits);
    const base = { ...fakeEnv, VCUDA_CONTEXT_OVERHEAD_MIB: '0' };
    const run = (argv: string[], knobs: Record<string, string> = {}) =>
      runInCdiContainer(edits, devices, argv, { ...base, ...knobs });
    return { edits, devices, cardUuid: h.gpu.listCards()[1]?.uuid as string, run, close };
  } catch (err) {
    await close();
    throw err;
  }
}

describe.skipIf(!namespaces)(`a claim's container on the fake driver${skipped}`, () => {
  it('a 30-core 64 MiB share of card 1: allocation to the limit, then out of memory; the views show the slice', async () => {
    const ctr = await claimContainer(30, 64);
    try {
      expect(ctr.edits.env).toContain(`CUDA_VISIBLE_DEVICES=${ctr.cardUuid}`);
      for (const scenario of ['paths', 'views']) {
        const run = ctr.run([client, scenario], { TEST_LIMIT_MIB: '64' });
        const failures = run.stderr.split('\n').filter((l) => l.startsWith('FAIL'));
        expect(failures, `${scenario}: ${run.stderr}`).toEqual([]);
        expect(run.status, `${scenario}: ${run.stderr}`).toBe(0);
      }
      // Without the claim's limit file the same container gets nothing: the limit is what allowed it.
      const bare = { ...ctr.edits, mounts: (ctr.edits.mounts ?? []).filter((m) => m.containerPath !== '/etc/vcuda') };
      const refused = runInCdiContainer(bare, ctr.devices, [client, 'try', '1'], {
        FAKEGPU_DEVICES: '2x1024',
        FAKEGPU_STATE: join(tmp, 'bare'),
      });
      expect(refused.stderr).toMatch(/vcuda: .*limit/);
      expect(refused.status).not.toBe(0);
    } finally {
      await ctr.close();
    }
  });
});

const hasToolkit = existsSync(nvcc);
describe.skipIf(!namespaces || !hasToolkit)(
  `NVIDIA's CUDA runtime in a claim's container${skipped || (hasToolkit ? '' : ` (skipped: ${nvcc} not found)`)}`,
  () => {
    beforeAll(() => {
      execFileSync('make', ['-s', '-C', native, 'cudart'], { stdio: 'inherit', timeout: 600_000 });
    }, 600_000);

    it.each<CudartRuntime>(['shared', 'static'])(
      '%s libcudart: the device shows the claim memory; every allocation path fills it exactly, then cudaErrorMemoryAllocation',
      async (runtime) => {
        const ctr = await claimContainer(50, 256);
        try {
          const run = (...args: string[]) => caseOf(ctr.run([conformanceBinary(runtime), ...args]), args);
          expectSeesLimit(run, 256);
          for (const kind of FILL_KINDS) expectFillsToLimit(run, kind, 256);
        } finally {
          await ctr.close();
        }
      },
    );
  },
);
