/**
 * The benchmark convention: each `test/bench/NAME.bench.ts` default-exports a Benchmark.
 * `npm run bench` runs them all, `npm run bench -- NAME` one; each writes
 * `bench/results/NAME.json` (machine, date, figures with units) and BENCHMARKS.md's generated
 * section is rebuilt from every JSON file present.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';

export type Figure = {
  /** Stable key, e.g. `filter_prioritize_p99_ms`. */
  name: string;
  value: number;
  unit: string;
  /** The target as a person reads it, e.g. `<= 2`. */
  target?: string;
  /** Whether the value meets the target (absent when there is none, or on a busy machine). */
  pass?: boolean;
  /** Scenario or context, e.g. `lone hard 30%`. */
  scenario?: string;
};

export type BenchContext = {
  /** Root of the repository. */
  root: string;
  log: (line: string) => void;
};

export type Benchmark = {
  name: string;
  description: string;
  run: (ctx: BenchContext) => Promise<Figure[]>;
};

/** The machine's load when a benchmark started: figures taken under others' work are not verdicts. */
export type MachineLoad = {
  /** 1-minute load average (runnable threads). */
  loadAvg1m: number;
  cores: number;
  /** The 1-minute load exceeded the core count: the figures are kept, the verdicts are not. */
  busy: boolean;
};

export type BenchResult = {
  name: string;
  description: string;
  date: string;
  machine: { cpu: string; cores: number; memoryGiB: number; os: string; node: string };
  /** Absent in results written before the load was recorded. */
  load?: MachineLoad;
  command: string;
  figures: Figure[];
};

export function machineLoad(loadAvg1m = loadavg()[0] ?? 0, cores = cpus().length): MachineLoad {
  return { loadAvg1m: Math.round(loadAvg1m * 100) / 100, cores, busy: loadAvg1m > cores };
}

/**
 * On a busy machine a figure says what the neighbours left, not what the code can do: keep the
 * value and the target, drop the met/missed verdict.
 */
export function withoutVerdictsWhenBusy(figures: readonly Figure[], load: MachineLoad): Figure[] {
  if (!load.busy) return [...figures];
  return figures.map(({ pass: _verdict, ...figure }) => figure);
}

const verdictOf = (f: Figure, busy: boolean, yes: string, no: string): string => {
  if (f.pass !== undefined) return f.pass ? yes : no;
  return busy && f.target ? 'busy machine' : '';
};

export function atMost(value: number, target: number): Pick<Figure, 'target' | 'pass'> {
  return { target: `<= ${target}`, pass: value <= target };
}

export function atLeast(value: number, target: number): Pick<Figure, 'target' | 'pass'> {
  return { target: `>= ${target}`, pass: value >= target };
}

/** A loopback port free right now, for a server that treats port 0 as "off". */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.once('error', reject);
  });
}

/** Percentile of a sample (nearest-rank). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

function machine(): BenchResult['machine'] {
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model.trim() ?? 'unknown',
    cores: cpu.length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `linux ${release()}`,
    node: process.version,
  };
}

export function listBenchmarks(root: string): string[] {
  return readdirSync(join(root, 'test/bench'))
    .filter((f) => f.endsWith('.bench.ts'))
    .map((f) => f.replace(/\.bench\.ts$/, ''))
    .sort();
}

function formatTable(figures: readonly Figure[], busy: boolean): string {
  const rows = figures.map((f) => [
    f.scenario ?? '',
    f.name,
    `${Number.isInteger(f.value) ? f.value : f.value.toFixed(3)} ${f.unit}`,
    f.target ?? '',
    verdictOf(f, busy, 'yes', 'NO'),
  ]);
  const head = ['scenario', 'figure', 'value', 'target', 'met'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export async function runBenchmarks(root: string, names: readonly string[], log = console.log): Promise<boolean> {
  const available = listBenchmarks(root);
  const selected = names.length > 0 ? names : available;
  const unknown = selected.filter((n) => !available.includes(n));
  if (unknown.length > 0) {
    throw new Error(`unknown benchmark ${unknown.join(', ')}; available: ${available.join(', ') || '(none)'}`);
  }
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  let allPass = true;
  for (const name of selected) {
    const mod = (await import(join(root, 'test/bench', `${name}.bench.ts`))) as { default: Benchmark };
    const bench = mod.default;
    log(`\n# ${bench.name}: ${bench.description}`);
    const load = machineLoad();
    if (load.busy) {
      log(`load average ${load.loadAvg1m} on ${load.cores} cores: figures recorded, no target verdicts`);
    }
    const figures = withoutVerdictsWhenBusy(await bench.run({ root, log }), load);
    const result: BenchResult = {
      name: bench.name,
      description: bench.description,
      date: new Date().toISOString(),
      machine: machine(),
      load,
      command: `npm run bench -- ${bench.name}`,
      figures,
    };
    writeFileSync(join(root, 'bench/results', `${name}.json`), `${JSON.stringify(result, null, 2)}\n`);
    log(formatTable(figures, load.busy));
    if (figures.some((f) => f.pass === false)) allPass = false;
  }
  writeBenchmarksMd(root);
  return allPass;
}

const BEGIN = '<!-- generated by npm run bench: do not edit between these markers -->';
const END = '<!-- end of generated section -->';

/** Rebuilds the generated section of BENCHMARKS.md from bench/results/*.json; text outside it is kept. */
export function writeBenchmarksMd(root: string): void {
  const dir = join(root, 'bench/results');
  const results = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as BenchResult);
  const sections = results.map((r) => {
    const m = r.machine;
    const busy = r.load?.busy ?? false;
    const rows = r.figures.map(
      (f) =>
        `| ${f.scenario ?? ''} | \`${f.name}\` | ${Number.isInteger(f.value) ? f.value : f.value.toFixed(3)} ${f.unit} | ${f.target ?? ''} | ${verdictOf(f, busy, 'yes', '**no**')} |`,
    );
    const load = r.load
      ? `, load average ${r.load.loadAvg1m} at start${busy ? ' — **taken on a busy machine: no target verdicts**' : ''}`
      : ', load not recorded';
    return [
      `### ${r.name}`,
      '',
      r.description,
      '',
      `\`${r.command}\` — ${r.date.slice(0, 10)}, ${m.cpu} (${m.cores} cores, ${m.memoryGiB} GiB), ${m.os}, node ${m.node}${load}`,
      '',
      '| scenario | figure | value | target | met |',
      '|---|---|---|---|---|',
      ...rows,
    ].join('\n');
  });
  const generated = `${BEGIN}\n\n${sections.join('\n\n')}\n\n${END}`;
  const path = join(root, 'BENCHMARKS.md');
  let current = '';
  try {
    current = readFileSync(path, 'utf8');
  } catch {
    current = `# Benchmarks\n\nEvery figure below comes from \`npm run bench\` (or \`npm run bench -- NAME\`) on the machine named beside it. Raw figures: \`bench/results/NAME.json\`.\n\n${BEGIN}\n${END}\n`;
  }
  const start = current.indexOf(BEGIN);
  const end = current.indexOf(END);
  const next =
    start >= 0 && end > start
      ? current.slice(0, start) + generated + current.slice(end + END.length)
      : `${current.trimEnd()}\n\n${generated}\n`;
  writeFileSync(path, next);
}
