// Run by heap-tuning.test.ts in a fresh node process: 300,000 objects from one allocation site
// that live (as open streams' requests do), then 4 million from the same site that die at once
// (as reviews' do). Prints how much the old generation took in during the second part, in MiB
// (its growth summed over rounds, so a major collection between two rounds does not hide it).
// A V8 flag as the first argument is set at run time first, as the control plane sets its own.
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

if (process.argv[2]) setFlagsFromString(process.argv[2]);
function make(i) {
  return { a: i, b: [i, i + 1], c: { d: i } };
}
const kept = [];
for (let i = 0; i < 300_000; i++) kept.push(make(i));
const oldUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size;
await new Promise((r) => setTimeout(r, 50));
let last = oldUsed();
let tookIn = 0;
let sum = 0;
for (let round = 0; round < 200; round++) {
  for (let i = 0; i < 20_000; i++) sum += make(i).c.d;
  await new Promise((r) => setImmediate(r));
  const now = oldUsed();
  tookIn += Math.max(0, now - last);
  last = now;
}
process.stdout.write(`${tookIn / 2 ** 20} ${kept.length} ${sum}\n`);
