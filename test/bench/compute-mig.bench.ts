/**
 * The compute benchmark's scenarios where NVML has no per-process utilization (MIG): the fake NVML
 * answers NOT_SUPPORTED for it (as on a MIG instance), the card sampler chooses libvcuda's
 * in-process sensor (busy time of launches timed with events, native/COMPUTE.md "The in-process
 * sensor"), and the limiters steer by it. Same scenarios, ground truth and targets as `compute`.
 */
import { buildNative, computeScenarios, measureScenario } from './compute-scenarios.js';
import type { Benchmark, Figure } from './harness.js';

const MIG_SCENARIOS = [
  'lone hard 30%',
  'lone hard 50%',
  'lone hard 70%',
  'two hard 30/70',
  'soft 30..60 alone (bursts to limit)',
  'soft 30..60 + hard 70 (keeps request)',
];

const bench: Benchmark = {
  name: 'compute-mig',
  description:
    'Compute-limit accuracy with the in-process sensor (NVML per-process utilization NOT_SUPPORTED, as on MIG): MAE of the achieved SM share over 1 s windows after a 2 s warm-up, and achieved share over limit, on 16- and 132-SM cards.',
  async run(ctx) {
    buildNative(ctx.root, ctx.log);
    const figures: Figure[] = [];
    for (const sms of [16, 132]) {
      for (const s of computeScenarios(sms).filter((x) => MIG_SCENARIOS.includes(x.label))) {
        const spec = { ...s.spec, sensor: 'in-process' as const };
        figures.push(...(await measureScenario(ctx, { ...s, spec }, sms, ' · in-process sensor')));
      }
    }
    return figures;
  },
};

export default bench;
