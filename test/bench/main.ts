/**
 * `npm run bench [-- NAME...]`: runs benchmarks, writes bench/results/*.json and BENCHMARKS.md.
 * A development entry point run through tsx, so the production `vcuda` command never loads test code.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tuneHeapForLongLivedConnections } from '../../control-plane/heap-tuning.js';
import { runBenchmarks } from './harness.js';

// Benchmarks that run the control plane's code in this process see the collector it runs with.
tuneHeapForLongLivedConnections();
const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
if (!(await runBenchmarks(root, process.argv.slice(2)))) {
  process.stdout.write('\nsome figures miss their targets (see "met" above)\n');
}
