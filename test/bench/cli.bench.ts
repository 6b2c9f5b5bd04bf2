/**
 * How fast the `vcuda` command answers, the way an admin runs it: `vcuda --version` from the
 * installed npm package (packed and installed as test/support/npm-package.ts does, run from an
 * unrelated directory) and from a checkout (bin/vcuda.js over a fresh build), and `vcuda doctor`
 * against a running `vcuda local` once its demo workload has settled, the line local mode prints.
 * Wall-clock milliseconds from spawn to exit (the targets) and CPU milliseconds, medians of several runs. The checkout's run through tsx (VCUDA_FROM_SOURCES=1, what a
 * checkout runs when its sources are newer than its build) is shown for comparison.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { packAndInstall } from '../support/npm-package.js';
import { atMost, type Benchmark, type Figure, percentile } from './harness.js';

const VERSION_RUNS = 10;
const DOCTOR_RUNS = 5;
const SETTLE_MS = 20_000;

type Runs = { wall: number[]; cpu: number[] };

/** `times`'s children line (`0m0.071s 0m0.012s`): user + system milliseconds. */
function cpuMsOf(stderr: string): number {
  const line = stderr.trim().split('\n').at(-1) ?? '';
  const parts = [...line.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60_000 + Number(m[2]) * 1000);
  return parts.length === 2 ? (parts[0] as number) + (parts[1] as number) : Number.NaN;
}

/**
 * Milliseconds from spawn to exit of each run, and the CPU time it used (user + system, from
 * bash's `times`): on a busy machine the wall clock says what the neighbours left, the CPU time
 * what the command costs. Sorted; throws when a run fails.
 */
function timeRuns(
  runs: number,
  command: string,
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; okStatus?: number[] },
): Runs {
  const out: Runs = { wall: [], cpu: [] };
  const script = '"$@"; status=$?; times >&2; exit $status';
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const r = spawnSync('bash', ['-c', script, 'bash', command, ...args], {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      encoding: 'utf8',
    });
    const ms = performance.now() - started;
    if (!(opts.okStatus ?? [0]).includes(r.status ?? -1)) {
      throw new Error(`cli bench: ${command} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    }
    out.wall.push(ms);
    out.cpu.push(cpuMsOf(r.stderr));
  }
  out.wall.sort((a, b) => a - b);
  out.cpu.sort((a, b) => a - b);
  return out;
}

const median = (sorted: number[]) => Math.round(percentile(sorted, 50));

/** Starts `vcuda local` and resolves with its doctor command line once it is ready. */
async function startLocal(
  repo: string,
  env: NodeJS.ProcessEnv,
): Promise<{ child: ChildProcess; doctorArgs: string[] }> {
  const child = spawn(process.execPath, [join(repo, 'bin/vcuda.js'), 'local'], {
    cwd: repo,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const deadline = Date.now() + 120_000;
  const line = await new Promise<string>((resolve, reject) => {
    const look = (d: Buffer) => {
      text += d.toString();
      const m = /^\s*doctor\s+vcuda doctor (.+)$/m.exec(text);
      if (m?.[1]) resolve(m[1]);
      else if (Date.now() > deadline)
        reject(new Error(`cli bench: vcuda local printed no doctor line: ${text.slice(-2000)}`));
    };
    child.stdout?.on('data', look);
    child.stderr?.on('data', (d: Buffer) => {
      text += d.toString();
    });
    child.once('exit', (code) => reject(new Error(`cli bench: vcuda local exited ${code}: ${text.slice(-2000)}`)));
  });
  child.stdout?.resume();
  child.stderr?.resume();
  return { child, doctorArgs: line.trim().split(/\s+/) };
}

const benchmark: Benchmark = {
  name: 'cli',
  description:
    '`vcuda --version` from the installed npm package and from a checkout, `vcuda doctor` against local mode',
  run: async ({ root: repo, log }) => {
    const env = { ...process.env, VCUDA_FROM_SOURCES: undefined, NODE_OPTIONS: undefined };
    // The checkout runs its build only while it is fresh: make it so, as `npm ci` does.
    execFileSync(process.execPath, [join(repo, 'deploy/build-dist.mjs'), '--prepare'], { stdio: 'inherit' });
    const installed = packAndInstall(repo);
    const figures: Figure[] = [];
    /** The wall-clock median against the target, and the CPU median beside it (no target). */
    const record = (name: string, scenario: string, runs: Runs, target?: number) => {
      const wall = median(runs.wall);
      const cpu = median(runs.cpu);
      figures.push({ name: `${name}_ms`, value: wall, unit: 'ms', scenario, ...(target ? atMost(wall, target) : {}) });
      figures.push({ name: `${name}_cpu_ms`, value: cpu, unit: 'ms', scenario: `${scenario}, CPU (user + system)` });
      log(`${name}: ${wall} ms wall, ${cpu} ms CPU`);
    };
    const clean = { cwd: installed.cleanDir, env };
    const bin = join(repo, 'bin/vcuda.js');

    // Node.js itself starting and exiting on this machine now: the floor under every figure.
    record('node_startup', 'node -e 0, for scale', timeRuns(VERSION_RUNS, process.execPath, ['-e', '0'], clean));
    record(
      'version_installed',
      'npm package, clean directory',
      timeRuns(VERSION_RUNS, installed.bin, ['--version'], clean),
      300,
    );
    record(
      'version_checkout',
      'checkout, fresh build',
      timeRuns(VERSION_RUNS, process.execPath, [bin, '--version'], { cwd: repo, env }),
      300,
    );
    const sources = { cwd: repo, env: { ...env, VCUDA_FROM_SOURCES: '1' } };
    record(
      'version_sources',
      'checkout, sources through tsx',
      timeRuns(3, process.execPath, [bin, '--version'], sources),
    );

    const local = await startLocal(repo, env);
    try {
      // Ready is printed while the demo workload is still being placed: measure the steady state.
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      // Exit status 1 is a finding (a check failed), not a failed run: the demo has pending pods on purpose.
      const args = ['doctor', ...local.doctorArgs];
      record(
        'doctor_local',
        'npm package against vcuda local',
        timeRuns(DOCTOR_RUNS, installed.bin, args, { ...clean, okStatus: [0, 1] }),
        1500,
      );
    } finally {
      local.child.kill('SIGTERM');
      if (local.child.exitCode === null) await once(local.child, 'exit');
    }
    return figures;
  },
};

export default benchmark;
