/**
 * A node agent with a kubelet, as its own process on the fake NVML, so a test can SIGKILL it
 * inside PreStartContainer between two steps of making a dynamic MIG instance:
 * `tsx dynamic-mig-agent-process.ts '<settings JSON>'` starts the agent harness (card `card` kept
 * for dynamic MIG, the checkpoint at `checkpointPath`; the FAKEGPU_* environment names the fake's
 * cards and state file). `admit` binds a pod with the dynamic grant of `profile` at `start` and
 * admits it (Allocate, PreStartContainer), then prints `ready <MIG uuid handed over>`; `gone`
 * starts the agent with that pod gone (the start reconciles) and prints `released`. With `killAt`
 * the agent kills its process with SIGKILL when it reaches that step. Its temp dirs go under
 * TMPDIR, which the test removes.
 */
import { readFileSync } from 'node:fs';
import { migResourceName } from '../../../contract/index.js';
import { cdiSpecPath } from '../../../node-agent/limits/cdi-spec.js';
import { allocationKey } from '../../../node-agent/limits/container-files.js';
import type { DynamicMigStep } from '../../../node-agent/mig/dynamic-mig.js';
import { NvmlGpuSource } from '../../../node-agent/nvml/nvml-gpu-source.js';
import { startHarness } from './agent-harness.js';
import { bindMigGrantPod, dynamicMigGrant } from './mig-pod.js';

type Settings = {
  lib: string;
  sysfsRoot: string;
  checkpointPath: string;
  card: number;
  profile: string;
  start: number;
  op: 'admit' | 'gone';
  killAt?: DynamicMigStep;
};

const s = JSON.parse(process.argv[2] ?? '{}') as Settings;
let nvml: NvmlGpuSource | undefined;
const h = await startHarness({
  gpuSource: () => {
    nvml = new NvmlGpuSource({ libraryPath: s.lib, sysfsRoot: s.sysfsRoot });
    return nvml;
  },
  config: { mig: { dynamicCards: [s.card], checkpointPath: s.checkpointPath } },
  dynamicMigFaults: () => (step) => {
    if (step === s.killAt) process.kill(process.pid, 'SIGKILL');
  },
});
try {
  if (s.op === 'admit') {
    const grant = dynamicMigGrant(nvml as NvmlGpuSource, s.card, s.profile, s.start);
    const pod = await bindMigGrantPod(h, 'train', s.profile, [grant]);
    await h.kubelet.admitPod(pod);
    const ids = h.kubelet.podDevices.get('default/train')?.get('main')?.get(migResourceName(h.names, s.profile)) ?? [];
    const spec = JSON.parse(readFileSync(cdiSpecPath(h.config.paths.cdiSpecDir, allocationKey(ids)), 'utf8'));
    const env: string[] = spec.devices[0].containerEdits.env;
    process.stdout.write(`ready ${env.find((e) => e.startsWith('NVIDIA_VISIBLE_DEVICES='))?.split('=')[1]}\n`);
  } else {
    process.stdout.write('released\n');
  }
} finally {
  await h.close();
}
