/**
 * `npm run bench [-- NAME...]`: runs benchmarks, writes bench/results/*.json and BENCHMARKS.md.
 * A development entry point run through tsx, so the production `vcuda` command never loads test code.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runBenchmarks } from './harness.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
if (!(await runBenchmarks(root, process.argv.slice(2)))) {
  process.stdout.write('\nsome figures miss their targets (see "met" above)\n');
}
