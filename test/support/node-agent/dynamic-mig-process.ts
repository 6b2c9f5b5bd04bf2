/**
 * Dynamic MIG as its own agent process on the fake NVML, so a test can SIGKILL it between two
 * steps as a crash would: `tsx dynamic-mig-process.ts '<settings JSON>'` opens NVML (the FAKEGPU_*
 * environment names the fake's cards and state file), reconciles its checkpoint with the live
 * holders, then ensures or releases one placement and prints `ready <MIG uuid>` or `released`.
 * With `killAt` it kills itself with SIGKILL when it reaches that step.
 */

import { DynamicMig, type DynamicMigStep } from '../../../node-agent/mig/dynamic-mig.js';
import { type MigPlacement, placementKey } from '../../../node-agent/mig/dynamic-mig-checkpoint.js';
import { NvmlGpuSource } from '../../../node-agent/nvml/nvml-gpu-source.js';

type Settings = {
  lib: string;
  sysfsRoot: string;
  checkpointPath: string;
  placement: MigPlacement;
  holder: string;
  liveHolders: string[];
  op: 'ensure' | 'release';
  killAt?: DynamicMigStep;
};

const s = JSON.parse(process.argv[2] ?? '{}') as Settings;
const nvml = new NvmlGpuSource({ libraryPath: s.lib, sysfsRoot: s.sysfsRoot });
const control = nvml.migControl();
if (!control) throw new Error(`${s.lib} has no MIG exports`);
const mig = new DynamicMig({
  control,
  cards: {
    migMode: (c) => nvml.migMode(c),
    isCardIdle: () => true,
    deviceUuid: (c, gi, ci) => nvml.migDeviceUuid(c, gi, ci),
  },
  checkpointPath: s.checkpointPath,
  faults: (step) => {
    if (step === s.killAt) process.kill(process.pid, 'SIGKILL');
  },
});
const live = new Set(s.liveHolders);
mig.reconcile((h) => live.has(h));
if (s.op === 'ensure') process.stdout.write(`ready ${mig.ensure(s.placement, s.holder).uuid}\n`);
else {
  mig.release(placementKey(s.placement), s.holder);
  process.stdout.write('released\n');
}
nvml.close();
