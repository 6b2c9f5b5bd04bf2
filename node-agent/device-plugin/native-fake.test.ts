/**
 * The agent on native/'s fake NVML (when `make -C native` has built it): what the kubelet sees,
 * a pod's allocation on the simulated cards, and an injected Xid reaching ListAndWatch.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startHarness } from '../../test/support/node-agent/agent-harness.js';
import { UNHEALTHY } from '../kubelet/protocol.js';
import { cdiSpecPath } from '../limits/cdi-spec.js';
import { allocationKey } from '../limits/container-files.js';
import { NvmlGpuSource } from '../nvml/nvml-gpu-source.js';

const native = join(dirname(fileURLToPath(import.meta.url)), '../../native/build/fake');
const lib = join(native, 'libnvidia-ml.so.1');
const ctl = join(native, 'fakegpu-ctl');
const tmp = mkdtempSync(join(tmpdir(), 'vcuda-native-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(!existsSync(lib) || !existsSync(ctl))('node agent on the native fake NVML', () => {
  it('advertises 2 x 81559 MiB, allocates a share on a simulated card, and streams an Xid', async () => {
    const env = { FAKEGPU_DEVICES: '2x81559', FAKEGPU_STATE: join(tmp, 'state') };
    Object.assign(process.env, env);
    const h = await startHarness({ gpuSource: () => new NvmlGpuSource({ libraryPath: lib, sysfsRoot: tmp }) });
    try {
      const { kubelet, names } = h;
      await kubelet.waitFor(() => kubelet.devices(names.core).length === 200, 'core devices');
      await kubelet.waitFor(() => kubelet.devices(names.memory).length === 2 * 81559, 'memory devices');
      const card = h.agent.health.list()[1];
      const pod = h.pod('on-fake').container('main', 25, 2048);
      await h.bind(pod, [[card?.uuid as string]]);
      await kubelet.admitPod(pod.kubelet(false));
      // The card reaches the container through the CDI spec PreStartContainer wrote.
      const ids = kubelet.podDevices.get('default/on-fake')?.get('main')?.get(names.core) ?? [];
      const spec = JSON.parse(readFileSync(cdiSpecPath(h.config.paths.cdiSpecDir, allocationKey(ids)), 'utf8'));
      const edits = spec.devices[0].containerEdits;
      expect(edits.env).toContain(`NVIDIA_VISIBLE_DEVICES=${card?.uuid}`);
      expect(edits.deviceNodes[0].path).toBe(`/dev/nvidia${card?.minorNumber}`);

      const updates = kubelet.updates(names.core);
      execFileSync(ctl, ['xid', '1', '48'], { env: { ...process.env, ...env }, stdio: 'pipe' });
      await kubelet.waitFor(() => kubelet.updates(names.core) > updates, 'health update', 5000);
      const unhealthy = kubelet.devices(names.core).filter((d) => d.health === UNHEALTHY);
      expect(unhealthy.map((d) => d.ID.split('-')[0])).toEqual(Array(100).fill('c1'));
    } finally {
      await h.close();
      delete process.env['FAKEGPU_DEVICES'];
      delete process.env['FAKEGPU_STATE'];
    }
  });
});
