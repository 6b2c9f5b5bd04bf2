/** `vcuda bench [NAME...]`: runs benchmarks, writes bench/results/*.json and BENCHMARKS.md. */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { listBenchmarks, runBenchmarks } from '../test/bench/harness.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export function registerBenchCommand(program: Command): void {
  program
    .command('bench')
    .description(`run benchmarks (all, or by name: ${listBenchmarks(root).join(', ') || 'none yet'})`)
    .argument('[names...]', 'benchmarks to run')
    .action(async (names: string[]) => {
      const ok = await runBenchmarks(root, names);
      if (!ok) process.stdout.write('\nsome figures miss their targets (see "met" above)\n');
    });
}
