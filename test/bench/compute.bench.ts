/**
 * Compute-limit accuracy on the fake GPU (CPU only): each scenario runs tenant processes under the
 * libvcuda preload with the node agent's card sampler, and measures each tenant's achieved share
 * from the fake driver's own busy-time accounting. MAE is over 1 s windows after a 2 s warm-up.
 * Every scenario runs on a 16-SM and a 132-SM card: the same grids give kernels 8x longer on the
 * small card, and the law must not care.
 */
import { buildNative, computeScenarios, measureScenario, wholeCard } from './compute-scenarios.js';
import type { Benchmark, Figure } from './harness.js';

const bench: Benchmark = {
  name: 'compute',
  description:
    'Compute-limit accuracy on the fake GPU: MAE of the achieved SM share against the target over 1 s windows after a 2 s warm-up (ground truth: the fake driver’s busy-time accounting), and achieved share over limit, on 16- and 132-SM cards.',
  async run(ctx) {
    buildNative(ctx.root, ctx.log);
    const figures: Figure[] = [];
    for (const sms of [16, 132]) {
      for (const s of computeScenarios(sms)) figures.push(...(await measureScenario(ctx, s, wholeCard(sms))));
    }
    return figures;
  },
};

export default bench;
