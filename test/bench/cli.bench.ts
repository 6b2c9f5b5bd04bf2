/**
 * How fast the `vcuda` command answers, the way an admin runs it: `vcuda --version` from the
 * installed npm package (packed and installed as test/support/npm-package.ts does, run from an
 * unrelated directory) and from a checkout (bin/vcuda.js over a fresh build), and `vcuda doctor`
 * against a running `vcuda local` once its demo workload has settled, the line local mode prints. Wall-clock milliseconds from spawn
 * to exit, median of several runs. The checkout's run through tsx (VCUDA_FROM_SOURCES=1, what a
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

/** Milliseconds from spawn to exit of each run; throws when a run fails. */
function timeRuns(
  runs: number,
  command: string,
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; okStatus?: number[] },
): number[] {
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const r = spawnSync(command, args, { cwd: opts.cwd, env: opts.env ?? process.env, encoding: 'utf8' });
    const ms = performance.now() - started;
    if (!(opts.okStatus ?? [0]).includes(r.status ?? -1)) {
      throw new Error(`cli bench: ${command} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    }
    out.push(ms);
  }
  return out.sort((a, b) => a - b);
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

    // What Node.js itself takes to start and exit on this machine now: the floor under every figure.
    const floor = median(timeRuns(VERSION_RUNS, process.execPath, ['-e', '0'], { cwd: installed.cleanDir, env }));
    figures.push({ name: 'node_startup_ms', value: floor, unit: 'ms', scenario: 'node -e 0, for scale' });
    const packaged = median(timeRuns(VERSION_RUNS, installed.bin, ['--version'], { cwd: installed.cleanDir, env }));
    figures.push({
      name: 'version_installed_ms',
      value: packaged,
      unit: 'ms',
      scenario: 'npm package, clean directory',
      ...atMost(packaged, 300),
    });
    const bin = join(repo, 'bin/vcuda.js');
    const checkout = median(timeRuns(VERSION_RUNS, process.execPath, [bin, '--version'], { cwd: repo, env }));
    figures.push({
      name: 'version_checkout_ms',
      value: checkout,
      unit: 'ms',
      scenario: 'checkout, fresh build',
      ...atMost(checkout, 300),
    });
    const tsx = median(
      timeRuns(3, process.execPath, [bin, '--version'], { cwd: repo, env: { ...env, VCUDA_FROM_SOURCES: '1' } }),
    );
    figures.push({ name: 'version_sources_ms', value: tsx, unit: 'ms', scenario: 'checkout, sources through tsx' });
    log(`--version: package ${packaged} ms, checkout ${checkout} ms, sources ${tsx} ms (node alone ${floor} ms)`);

    const local = await startLocal(repo, env);
    try {
      // Ready is printed while the demo workload is still being placed: measure the steady state.
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      // Exit status 1 is a finding (a check failed), not a failed run: the demo has pending pods on purpose.
      const doctor = median(
        timeRuns(DOCTOR_RUNS, installed.bin, ['doctor', ...local.doctorArgs], {
          cwd: installed.cleanDir,
          env,
          okStatus: [0, 1],
        }),
      );
      figures.push({
        name: 'doctor_local_ms',
        value: doctor,
        unit: 'ms',
        scenario: 'npm package against vcuda local',
        ...atMost(doctor, 1500),
      });
      log(`doctor against local mode: ${doctor} ms`);
    } finally {
      local.child.kill('SIGTERM');
      if (local.child.exitCode === null) await once(local.child, 'exit');
    }
    return figures;
  },
};

export default benchmark;
