/**
 * libvcuda's cost, measured against the fake driver (no GPU): every figure compares the same
 * client with and without LD_PRELOAD=libvcuda.so in the same run, so the fake driver's own cost
 * cancels out.
 *
 * alloc_free_hook_ns: ns added per cuMemAlloc_v2(1 MiB) + cuMemFree_v2 pair (limit file read,
 *   region reservation under the robust lock, pointer table).
 * cudart_alloc_free_hook_ns: the same through NVIDIA's CUDA runtime (cudaMalloc + cudaFree,
 *   native/test/cudart/bench_alloc.cu built with /usr/local/cuda's nvcc against the shared
 *   libcudart); skipped, saying why, without the toolkit.
 * launch_hook_ns: ns added per cuLaunchKernel resolved through cuGetProcAddress as cudart does,
 *   with core=100 (a whole card): the hook returns before the limiter, so this is routing only.
 * launch_limited_hook_ns: the same under a hard 50 % limit with tokens available: the limiter's
 *   fast path (limits word, sample check, one atomic on the shared bucket, thread-local counters).
 *   The learned per-launch cost is set to 1 ns in the region so 2 M launches never empty the bucket.
 * launch_throttled_*: the limiter holding launches back: hard 50 %, learned cost 10 µs, so each
 *   launch must wait cost / rate = 20 µs of wall time. The share is the cost charged per wall
 *   time measured: the limit when the wait is exactly what the bucket owes, lower when sleeps
 *   overshoot, higher if the limiter let work through.
 * launch_routing_ns: a libvcuda built without the limiter: what cuGetProcAddress routing adds.
 * init_ms_1 / init_ms_64: time spent inside cuInit (limit file, accounting region, driver) by one
 *   process alone, and the median over 64 processes started at once (max reported beside it).
 * Per-call figures: the fastest of 7 runs, runs with and without the preload interleaved. On a
 * shared machine the minimum is the run least disturbed by other work; both sides get the same
 * treatment, so the difference is the hook's cost. The throttled figure is a median: its runs are
 * dominated by sleeping, and the fastest would be the one that let the most through.
 *
 * VCUDA_BENCH_NATIVE_SCALE (default 1) scales every iteration count and VCUDA_BENCH_NATIVE_RUNS
 * (default 7) the runs per figure, for a quick check that the benchmark works.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeLimitConfig, regionDeviceOffset, regionOffsets } from '../../contract/index.js';
import { limiterOffsets } from '../../node-agent/compute/limiter-state.js';
import { atMost, type Benchmark, type Figure, percentile } from './harness.js';

const SCALE = Number(process.env.VCUDA_BENCH_NATIVE_SCALE ?? 1);
const RUNS = Math.max(1, Number(process.env.VCUDA_BENCH_NATIVE_RUNS ?? 7));
const scaled = (n: number) => Math.max(10, Math.round(n * SCALE));
const ALLOC_ITERATIONS = scaled(200_000);
const CUDART_ALLOC_ITERATIONS = scaled(100_000);
const LAUNCH_ITERATIONS = scaled(2_000_000);
const THROTTLED_COST_NS = 10_000;
const THROTTLED_LIMIT_PCT = 50;
const THROTTLED_LAUNCHES = Math.max(500, scaled(5_000));
/** Warm-up launches of the throttled run: 20 ms of charges, more than the 10 ms a full bucket
 * holds at 50 %, so the timed launches all wait. */
const THROTTLED_WARM_UP = 2_000;
const CONCURRENT = 64;
const FAKE_UUID = 'GPU-fa4e6770-0000-4000-8000-000000000000';
const NVCC = '/usr/local/cuda/bin/nvcc';

type Env = NodeJS.ProcessEnv;
type Side = { plain: Env; hooked: Env };

/** A limit file with one device (64 GiB, hard at `corePct`) and its region path. */
function writeConfig(dir: string, name: string, corePct: number): { config: string; region: string } {
  const config = join(dir, `${name}.conf`);
  const region = join(dir, `${name}.region`);
  writeFileSync(
    config,
    encodeLimitConfig({
      podUid: `bench-${name}`,
      containerName: 'main',
      regionPath: region,
      writtenAtMs: Date.now(),
      devices: [
        {
          uuid: FAKE_UUID,
          hostIndex: 0,
          mode: 'hard',
          memoryLimitBytes: 64 * 2 ** 30,
          coreRequest: corePct,
          coreLimit: corePct,
        },
      ],
    }),
  );
  return { config, region };
}

/** Sets the limiter's learned per-launch cost in device 0's block of a region (the value the
 * controller would have learned from the node agent's samples; none run here). */
function seedLearnedCost(region: string, costNs: number): void {
  // cost = (q8 >> 8) + 1; the low bits keep q8 non-zero (0 means "no estimate yet") at 1 ns.
  const q8 = Buffer.alloc(8);
  q8.writeBigUInt64LE((BigInt(costNs - 1) << 8n) | 1n);
  const fd = openSync(region, 'r+');
  try {
    writeSync(fd, q8, 0, 8, regionDeviceOffset(0) + regionOffsets.device.limiterState + limiterOffsets.costQ8);
  } finally {
    closeSync(fd);
  }
}

function once(binary: string, env: Env, args: string[]): number {
  const r = spawnSync(binary, args, { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${binary} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return Number(r.stdout.trim());
}

/** Fastest of RUNS for each side, the two sides alternating run by run. */
function fastestPair(binary: string, side: Side, args: string[]): [number, number] {
  let plain = Number.POSITIVE_INFINITY;
  let withHook = Number.POSITIVE_INFINITY;
  for (let i = 0; i < RUNS; i++) {
    plain = Math.min(plain, once(binary, side.plain, args));
    withHook = Math.min(withHook, once(binary, side.hooked, args));
  }
  return [plain, withHook];
}

const added = (hooked: number, plain: number) => Math.max(0, Math.round((hooked - plain) * 10) / 10);

/** The three figures of a paired measurement: without the preload, with it, and what it adds. */
function pairFigures(
  prefix: string,
  [plain, hooked]: [number, number],
  scenarios: { plain: string; hooked: string; added: string },
  addedAtMost?: number,
): Figure[] {
  const hook = added(hooked, plain);
  const target = addedAtMost === undefined ? {} : atMost(hook, addedAtMost);
  return [
    { name: `${prefix}_fake_ns`, value: plain, unit: 'ns', scenario: scenarios.plain },
    { name: `${prefix}_vcuda_ns`, value: hooked, unit: 'ns', scenario: scenarios.hooked },
    { name: `${prefix}_hook_ns`, value: hook, unit: 'ns', scenario: scenarios.added, ...target },
  ];
}

/** cudaMalloc + cudaFree through NVIDIA's runtime, or the reason it cannot be measured here. */
function measureCudart(root: string, side: Side): Figure[] | string {
  if (!existsSync(NVCC)) return `${NVCC} not found`;
  const make = spawnSync('make', ['-s', '-C', join(root, 'native'), 'build/cudart/bench_alloc'], { encoding: 'utf8' });
  if (make.status !== 0) return `building bench_alloc with nvcc failed: ${make.stderr.trim()}`;
  const binary = join(root, 'native/build/cudart/bench_alloc');
  return pairFigures('cudart_alloc_free', fastestPair(binary, side, [String(CUDART_ALLOC_ITERATIONS)]), {
    plain: 'cudaMalloc+cudaFree 1 MiB, fake driver',
    hooked: 'the same under libvcuda',
    added: 'added by libvcuda per pair (cudart)',
  });
}

/** Launches held by the limiter: median ns per launch against the wait the bucket owes. */
function measureThrottled(client: string, hooked: Env): Figure[] {
  const args = ['launch', String(THROTTLED_LAUNCHES), String(THROTTLED_WARM_UP)];
  const runs = Array.from({ length: RUNS }, () => once(client, hooked, args)).sort((a, b) => a - b);
  const perLaunch = percentile(runs, 50);
  const expected = (THROTTLED_COST_NS * 100) / THROTTLED_LIMIT_PCT;
  const share = Math.round(((THROTTLED_COST_NS * 100) / perLaunch) * 100) / 100;
  const scenario = `hard ${THROTTLED_LIMIT_PCT} %, learned cost ${THROTTLED_COST_NS / 1000} µs, zero-time kernels`;
  return [
    { name: 'launch_throttled_ns', value: perLaunch, unit: 'ns', scenario: `${scenario} (median of ${RUNS})` },
    { name: 'launch_throttled_expected_ns', value: expected, unit: 'ns', scenario: 'cost / rate: the wait owed' },
    {
      name: 'launch_throttled_share_pct',
      value: share,
      unit: '%',
      scenario: 'cost charged per wall time: the limit when the wait is exact',
      target: `${THROTTLED_LIMIT_PCT - 5}..${THROTTLED_LIMIT_PCT}`,
      pass: share >= THROTTLED_LIMIT_PCT - 5 && share <= THROTTLED_LIMIT_PCT + 0.5,
    },
  ];
}

/** Median cuInit time of one process, then of CONCURRENT processes started at once. */
async function measureInit(client: string, hooked: Env): Promise<Figure[]> {
  const init1 = percentile(
    Array.from({ length: RUNS }, () => once(client, hooked, ['init'])).sort((a, b) => a - b),
    50,
  );
  const concurrent = await Promise.all(
    Array.from(
      { length: CONCURRENT },
      () =>
        new Promise<number>((resolve, reject) => {
          const child = spawn(client, ['init'], { env: hooked });
          let out = '';
          child.stdout.on('data', (d: Buffer) => {
            out += d.toString();
          });
          child.on('error', reject);
          child.on('close', (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`init ${code}`))));
        }),
    ),
  );
  const sorted = [...concurrent].sort((a, b) => a - b);
  const init64 = percentile(sorted, 50);
  return [
    {
      name: 'init_ms_1',
      value: init1,
      unit: 'ms',
      scenario: `cuInit, 1 process (median of ${RUNS})`,
      ...atMost(init1, 20),
    },
    {
      name: 'init_ms_64',
      value: init64,
      unit: 'ms',
      scenario: `cuInit, median of ${CONCURRENT} processes at once`,
      ...atMost(init64, 20),
    },
    {
      name: 'init_ms_64_max',
      value: sorted.at(-1) ?? Number.NaN,
      unit: 'ms',
      scenario: `cuInit, slowest of ${CONCURRENT}`,
    },
  ];
}

/** Launch overhead without a limit, with one in force, and through the routing-only build. */
function measureLaunches(root: string, client: string, base: Env, dir: string, log: (l: string) => void): Figure[] {
  const build = join(root, 'native/build');
  const preload = { LD_PRELOAD: join(build, 'libvcuda.so') };
  const args = ['launch', String(LAUNCH_ITERATIONS)];
  const whole = writeConfig(dir, 'whole', 100);
  const [fake, hooked] = fastestPair(
    client,
    { plain: base, hooked: { ...base, ...preload, VCUDA_CONFIG: whole.config } },
    args,
  );
  log(`launch: fake ${fake} ns, with libvcuda (core 100) ${hooked} ns`);

  const limited = writeConfig(dir, 'limited', THROTTLED_LIMIT_PCT);
  const limitedEnv = { ...base, ...preload, VCUDA_CONFIG: limited.config };
  once(client, limitedEnv, ['init']); // creates the region
  seedLearnedCost(limited.region, 1);
  const [limitedFake, limitedHooked] = fastestPair(client, { plain: base, hooked: limitedEnv }, args);
  log(`launch under a ${THROTTLED_LIMIT_PCT} % limit: fake ${limitedFake} ns, with libvcuda ${limitedHooked} ns`);

  const figures: Figure[] = [
    ...pairFigures(
      'launch',
      [fake, hooked],
      {
        plain: 'fake driver alone',
        hooked: 'under libvcuda, core 100 (no limit)',
        added: 'added per cuLaunchKernel, no limit (returns before the limiter)',
      },
      30,
    ),
    ...pairFigures(
      'launch_limited',
      [limitedFake, limitedHooked],
      {
        plain: 'fake driver alone (paired run)',
        hooked: `under libvcuda, hard ${THROTTLED_LIMIT_PCT} %, tokens available`,
        added: 'added per cuLaunchKernel by the limiter fast path',
      },
      30,
    ),
  ];

  const throttled = writeConfig(dir, 'throttled', THROTTLED_LIMIT_PCT);
  const throttledEnv = { ...base, ...preload, VCUDA_CONFIG: throttled.config };
  once(client, throttledEnv, ['init']);
  seedLearnedCost(throttled.region, THROTTLED_COST_NS);
  figures.push(...measureThrottled(client, throttledEnv));

  const memoryOnly = join(build, 'bench/libvcuda-memory-only.so');
  if (spawnSync('make', ['-s', '-C', join(root, 'native'), 'build/bench/libvcuda-memory-only.so']).status === 0) {
    const routed = { ...base, LD_PRELOAD: memoryOnly, VCUDA_CONFIG: whole.config };
    const [plain, withRouting] = fastestPair(client, { plain: base, hooked: routed }, args);
    figures.push({
      name: 'launch_routing_ns',
      value: added(withRouting, plain),
      unit: 'ns',
      scenario: 'libvcuda without the limiter (driver pointer returned: noise floor)',
    });
  }
  return figures;
}

const bench: Benchmark = {
  name: 'native',
  description:
    'libvcuda.so overhead on the allocation (driver and cudart), launch (unlimited, limited, throttled) and init paths (fake driver, with vs without the preload)',
  async run({ root, log }) {
    const build = join(root, 'native/build');
    const make = spawnSync('make', ['-s', '-C', join(root, 'native')], { encoding: 'utf8' });
    if (make.status !== 0) throw new Error(`make -C native failed: ${make.stderr}`);
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-bench-'));
    try {
      const client = join(build, 'test/bench_client');
      const base: Env = {
        ...process.env,
        LD_LIBRARY_PATH: join(build, 'fake'),
        FAKEGPU_STATE: join(dir, 'fakegpu.state'),
        FAKEGPU_DEVICES: '1x81559',
        FAKEGPU_KERNEL_US: '0',
        VCUDA_CONTEXT_OVERHEAD_MIB: '0',
      };
      const whole = {
        ...base,
        LD_PRELOAD: join(build, 'libvcuda.so'),
        VCUDA_CONFIG: writeConfig(dir, 'alloc', 100).config,
      };
      const [allocFake, allocHooked] = fastestPair(client, { plain: base, hooked: whole }, [
        'alloc',
        String(ALLOC_ITERATIONS),
      ]);
      log(`alloc+free pair: fake ${allocFake} ns, with libvcuda ${allocHooked} ns`);
      const figures = pairFigures('alloc_free', [allocFake, allocHooked], {
        plain: 'fake driver alone, 1 MiB',
        hooked: 'under libvcuda, 1 MiB',
        added: 'added by libvcuda per pair',
      });
      const cudart = measureCudart(root, { plain: base, hooked: whole });
      if (typeof cudart === 'string') log(`cudart alloc/free skipped: ${cudart}`);
      else figures.push(...cudart);
      figures.push(...measureLaunches(root, client, base, dir, log));
      figures.push(...(await measureInit(client, whole)));
      return figures;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default bench;
