/**
 * Where a benchmark's CPU went: reads a `.cpuprofile` written by `node --cpu-prof` and prints,
 * for the window between the first and last sample whose stack holds a function matching
 * `marker` (e.g. `reserveAndBind`: the bind phase of the extender bench), busy against idle
 * time, the functions with the most self time, and the project's functions by inclusive time.
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof bin/vcuda.js bench extender
 *   npx tsx test/bench/cpu-profile-summary.ts /tmp/prof/CPU.*.cpuprofile reserveAndBind
 *
 * The starts bench's real-tier 200-pod rounds, with the control plane (this process) and every
 * simulated node (each node process inherits the --cpu-prof flags) profiled:
 *
 *   VCUDA_BENCH_STARTS_TIERS=real VCUDA_BENCH_STARTS_CLUSTERS=four VCUDA_BENCH_STARTS_WARM_UP=50 \
 *     node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx test/bench/main.ts starts
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

type ProfileNode = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
};
type CpuProfile = { nodes: ProfileNode[]; startTime: number; samples: number[]; timeDeltas: number[] };

export type ProfileSummary = {
  windowMs: number;
  busyMs: number;
  idleMs: number;
  self: [string, number][];
  inclusive: [string, number][];
};

function labelOf(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url
    .replace(/.*node_modules\//, '')
    .replace(/^file:\/\/.*?\/(?=(control-plane|db|webhooks|contract|test|sim|node-agent|cli)\/)/, '');
  return `${functionName || '(anonymous)'} ${where}:${lineNumber}`;
}

/** Self and inclusive milliseconds per function inside the marker's window. */
export function summarizeProfile(profile: CpuProfile, marker: RegExp): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stackOf = (id: number): string[] => {
    const out: string[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const node = byId.get(at);
      if (node) out.push(labelOf(node));
    }
    return out;
  };
  let clock = profile.startTime;
  const times = profile.timeDeltas.map((d) => (clock += d));
  const marked = profile.samples.map((id) => stackOf(id).some((l) => marker.test(l)));
  const first = times.find((_, i) => marked[i]) ?? 0;
  const last = times.findLast((_, i) => marked[i]) ?? -1;
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const at = times[i] ?? 0;
    if (at < first || at > last) return;
    const us = profile.timeDeltas[i] ?? 0;
    const stack = stackOf(id);
    const top = stack[0] ?? '(unknown)';
    if (top.startsWith('(idle)')) {
      idle += us;
      return;
    }
    busy += us;
    self.set(top, (self.get(top) ?? 0) + us);
    for (const label of new Set(stack)) inclusive.set(label, (inclusive.get(label) ?? 0) + us);
  });
  const sorted = (m: Map<string, number>) =>
    [...m].map(([k, us]) => [k, us / 1000] as [string, number]).sort((a, b) => b[1] - a[1]);
  return {
    windowMs: (last - first) / 1000,
    busyMs: busy / 1000,
    idleMs: idle / 1000,
    self: sorted(self),
    inclusive: sorted(inclusive),
  };
}

function main(argv: string[]): void {
  const [file, marker] = argv;
  if (!file || !marker) {
    process.stderr.write('usage: cpu-profile-summary.ts FILE.cpuprofile MARKER_FUNCTION_REGEX\n');
    process.exitCode = 2;
    return;
  }
  const s = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, new RegExp(marker));
  const pct = (ms: number) => `${((100 * ms) / Math.max(1, s.busyMs)).toFixed(1).padStart(5)}%`;
  const rows = (list: [string, number][]) => list.map(([k, ms]) => `${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${k}`);
  const ours = s.inclusive.filter(([k]) =>
    /^\S+ (control-plane|db|webhooks|contract|node-agent|kube-connections|sim|cli)\//.test(k),
  );
  process.stdout.write(
    [
      `window ${s.windowMs.toFixed(0)} ms: busy ${s.busyMs.toFixed(0)} ms, idle ${s.idleMs.toFixed(0)} ms`,
      '-- self time',
      ...rows(s.self.slice(0, 25)),
      '-- inclusive, project code',
      ...rows(ours.slice(0, 25)),
      '',
    ].join('\n'),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) main(process.argv.slice(2));
