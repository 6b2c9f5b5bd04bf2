/**
 * Memory bursts on the fake driver (native/test/burst_bench_client.c under libvcuda):
 *
 * burst_alloc_free_ns vs plain_alloc_free_ns: cuMemAlloc_v2 + cuMemFree_v2 of 2 MiB served from
 *   the guarantee (a 64 GiB guarantee) and as a burst (a 1 MiB guarantee bursting to 64 GiB:
 *   managed memory, advice, the burst record). Fastest of RUNS each, interleaved. Target: the
 *   burst path at most twice the plain one.
 * guaranteed_p99_*: a guaranteed tenant (4 GiB on an 8 GiB card) timing each alloc + free of
 *   64 MiB, alone and while a neighbour (4 GiB bursting to 8 GiB) holds the whole card and runs a
 *   kernel every millisecond, which migrates its evicted pages back: each of the tenant's
 *   allocations then has to evict. Target: p99 <= 1 ms beside the burster.
 * burster_kernel_*: the neighbour's launch-to-synchronized time alone and while it is being
 *   evicted: the slowdown bursting costs the burster (FAKEGPU_UVM_NS_PER_MIB, 25 GiB/s).
 *
 * VCUDA_BENCH_BURST_SCALE (default 1) scales the iteration counts for a quick check.
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeLimitConfig, MIB } from '../../contract/index.js';
import { atMost, type Benchmark, type Figure } from './harness.js';

const SCALE = Number(process.env.VCUDA_BENCH_BURST_SCALE ?? 1);
const scaled = (n: number) => Math.max(10, Math.round(n * SCALE));
const PAIRS = scaled(100_000);
const LATENCY_PAIRS = scaled(3_000);
const RUNS = 5;
const FAKE_UUID = 'GPU-fa4e6770-0000-4000-8000-000000000000';

type Env = NodeJS.ProcessEnv;
type Latency = { p50: number; p99: number; max: number };
type Kernels = { kernels: number; meanUs: number; maxUs: number };

function limitFile(dir: string, name: string, memoryMiB: number, burstMiB?: number): string {
  const config = join(dir, `${name}.conf`);
  writeFileSync(
    config,
    encodeLimitConfig({
      podUid: `bench-${name}`,
      containerName: 'main',
      regionPath: join(dir, `${name}.region`),
      writtenAtMs: Date.now(),
      devices: [
        {
          uuid: FAKE_UUID,
          hostIndex: 0,
          mode: 'hard',
          memoryLimitBytes: memoryMiB * MIB,
          coreRequest: 100,
          coreLimit: 100,
          ...(burstMiB ? { memoryBurstLimitBytes: burstMiB * MIB } : {}),
        },
      ],
    }),
  );
  return config;
}

function runClient(client: string, env: Env, args: string[]): string {
  const r = spawnSync(client, args, { env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${client} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}

/** Starts the burster and resolves once it holds its memory. */
function startBurster(client: string, env: Env, mib: number): Promise<ChildProcessWithoutNullStreams> {
  const child = spawn(client, ['burst', String(mib)], { env });
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) =>
      String(d).startsWith('ready') ? resolve(child) : reject(new Error(`burster: ${d}`)),
    );
    child.once('exit', (code) => reject(new Error(`burster exited ${code}`)));
  });
}

async function stopBurster(child: ChildProcessWithoutNullStreams): Promise<Kernels> {
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += String(d);
  });
  const exited = new Promise((done) => child.once('exit', done));
  child.stdin.end();
  await exited;
  return JSON.parse(out.trim().split('\n').pop() ?? '{}') as Kernels;
}

function allocationCost(client: string, base: Env, dir: string): Figure[] {
  const plain = { ...base, VCUDA_CONFIG: limitFile(dir, 'plain', 64 * 1024) };
  const burst = { ...base, VCUDA_CONFIG: limitFile(dir, 'burst', 1, 64 * 1024) };
  let plainNs = Number.POSITIVE_INFINITY;
  let burstNs = Number.POSITIVE_INFINITY;
  for (let i = 0; i < RUNS; i++) {
    plainNs = Math.min(plainNs, Number(runClient(client, plain, ['pairs', String(PAIRS), '2'])));
    burstNs = Math.min(burstNs, Number(runClient(client, burst, ['pairs', String(PAIRS), '2'])));
  }
  const ratio = Math.round((burstNs / plainNs) * 100) / 100;
  return [
    { name: 'plain_alloc_free_ns', value: plainNs, unit: 'ns', scenario: '2 MiB from the guarantee, under libvcuda' },
    { name: 'burst_alloc_free_ns', value: burstNs, unit: 'ns', scenario: '2 MiB as a burst (managed memory)' },
    { name: 'burst_to_plain_ratio', value: ratio, unit: 'x', scenario: 'burst path / plain path', ...atMost(ratio, 2) },
  ];
}

async function besideBurster(client: string, base: Env, dir: string): Promise<Figure[]> {
  const card = { ...base, FAKEGPU_STATE: join(dir, 'shared.state'), FAKEGPU_DEVICES: '1x8192' };
  const tenant = { ...card, VCUDA_CONFIG: limitFile(dir, 'tenant', 4096) };
  const neighbour = { ...card, VCUDA_CONFIG: limitFile(dir, 'neighbour', 4096, 8192) };
  const latency = () => JSON.parse(runClient(client, tenant, ['latency', String(LATENCY_PAIRS), '64'])) as Latency;
  const alone = latency();
  const idle = await startBurster(client, neighbour, 8192);
  await new Promise((done) => setTimeout(done, 1000));
  const burstAlone = await stopBurster(idle);
  const burster = await startBurster(client, neighbour, 8192);
  let beside: Latency;
  let evicted: Kernels;
  try {
    beside = latency();
  } finally {
    evicted = await stopBurster(burster);
  }
  const us = (ns: number) => Math.round(ns / 100) / 10;
  return [
    { name: 'guaranteed_p99_alone_us', value: us(alone.p99), unit: 'µs', scenario: 'tenant alone: 64 MiB alloc+free' },
    {
      name: 'guaranteed_p50_beside_burst_us',
      value: us(beside.p50),
      unit: 'µs',
      scenario: 'tenant beside a neighbour bursting over the whole card',
    },
    {
      name: 'guaranteed_p99_beside_burst_us',
      value: us(beside.p99),
      unit: 'µs',
      scenario: 'the same, p99 (each allocation evicts)',
      ...atMost(us(beside.p99), 1000),
    },
    { name: 'guaranteed_max_beside_burst_us', value: us(beside.max), unit: 'µs', scenario: 'the same, slowest' },
    {
      name: 'burster_kernel_alone_us',
      value: burstAlone.meanUs,
      unit: 'µs',
      scenario: `burster's kernel launch-to-sync, mean of ${burstAlone.kernels}, nobody evicting`,
    },
    {
      name: 'burster_kernel_evicted_us',
      value: evicted.meanUs,
      unit: 'µs',
      scenario: `the same while the tenant evicts it, mean of ${evicted.kernels} (host pages cost 40 µs/MiB)`,
    },
  ];
}

const bench: Benchmark = {
  name: 'memory-burst',
  description:
    "libvcuda's burst path on the fake driver: its cost per allocation against the plain path, and a guaranteed tenant's allocation latency while a neighbour bursts over the whole card",
  async run({ root, log }) {
    const build = join(root, 'native/build');
    const make = spawnSync('make', ['-s', '-C', join(root, 'native')], { encoding: 'utf8' });
    if (make.status !== 0) throw new Error(`make -C native failed: ${make.stderr}`);
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-bench-burst-'));
    try {
      const client = join(build, 'test/burst_bench_client');
      const base: Env = {
        ...process.env,
        LD_PRELOAD: join(build, 'libvcuda.so'),
        LD_LIBRARY_PATH: join(build, 'fake'),
        FAKEGPU_STATE: join(dir, 'fakegpu.state'),
        FAKEGPU_DEVICES: '1x81920',
        FAKEGPU_KERNEL_US: '0',
        VCUDA_CONTEXT_OVERHEAD_MIB: '0',
      };
      const figures = allocationCost(client, base, dir);
      log(`alloc+free: plain ${figures[0]?.value} ns, burst ${figures[1]?.value} ns`);
      figures.push(...(await besideBurster(client, base, dir)));
      return figures;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

export default bench;
