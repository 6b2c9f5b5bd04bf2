/**
 * The compute benchmark's scenarios where NVML has no per-process utilization (MIG), steered by
 * libvcuda's in-process sensor (busy time of launches timed with events, native/COMPUTE.md "The
 * in-process sensor"). In shared MIG instances of a fake H100 80GB in MIG mode (a 3g.40gb and a
 * 1g.10gb): the tenants are given the instance by its MIG- UUID as the node agent's CDI spec gives
 * it, their limit files name that UUID, and NVML has no per-process utilization on the MIG card, so
 * the sampler chooses the in-process sensor by itself. On whole 16- and 132-SM cards too, with the
 * fake NVML answering NOT_SUPPORTED for per-process utilization: the sensor without MIG around it.
 * Same scenarios, ground truth and targets as `compute`.
 */
import {
  type BenchDevice,
  buildNative,
  computeScenarios,
  measureScenario,
  migInstance,
  wholeCard,
} from './compute-scenarios.js';
import type { Benchmark, Figure } from './harness.js';

const MIG_SCENARIOS = [
  'lone hard 30%',
  'lone hard 50%',
  'lone hard 70%',
  'two hard 30/70',
  'soft 30..60 alone (bursts to limit)',
  'soft 30..60 + hard 70 (keeps request)',
];

/** Profile IDs as `nvidia-smi mig -lgip` lists them on an H100 80GB. */
const DEVICES: BenchDevice[] = [
  wholeCard(16),
  wholeCard(132),
  migInstance('3g.40gb', 60, { profileId: 9 }),
  migInstance('1g.10gb', 16, { profileId: 19 }),
];

const bench: Benchmark = {
  name: 'compute-mig',
  description:
    'Compute-limit accuracy with the in-process sensor as the only source: MAE of the achieved SM share over 1 s windows after a 2 s warm-up, and achieved share over limit, in shared MIG instances of an H100 80GB (3g.40gb, 1g.10gb; tenants given the instance by MIG- UUID) and on whole 16- and 132-SM cards with NVML per-process utilization NOT_SUPPORTED.',
  async run(ctx) {
    buildNative(ctx.root, ctx.log);
    const figures: Figure[] = [];
    for (const device of DEVICES) {
      for (const s of computeScenarios(device.sms).filter((x) => MIG_SCENARIOS.includes(x.label))) {
        const spec = { ...s.spec, sensor: 'in-process' as const };
        figures.push(...(await measureScenario(ctx, { ...s, spec }, device, ' · in-process sensor')));
      }
    }
    return figures;
  },
};

export default bench;
