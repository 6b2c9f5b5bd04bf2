/**
 * NVIDIA's CUDA 13.0 runtime (libcudart, shared and static) under libvcuda over the fake driver:
 * native/test/cudart/conformance.cu, built with the toolkit's nvcc, runs one case per process with
 * a fresh limit file, accounting region and simulated card. Skipped, with the reason in its name,
 * where the toolkit is not installed.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeLimitConfig } from '../../contract/index.js';
import {
  type Case,
  CUDA_ERROR_MEMORY_ALLOCATION,
  type CudartRuntime,
  caseOf,
  conformanceBinary,
  expectFillsToLimit,
  expectSeesLimit,
  FILL_KINDS,
  MiB,
} from '../../test/support/native/cudart-checks.js';

const root = resolve(import.meta.dirname, '../..');
const native = join(root, 'native');
const build = join(native, 'build');
const nvcc = '/usr/local/cuda/bin/nvcc';
const hasToolkit = existsSync(nvcc);
const LIMIT_MIB = 1024;
const UUID = 'GPU-fa4e6770-0000-4000-8000-000000000000';

type Runtime = CudartRuntime;

const tmp = mkdtempSync(join(tmpdir(), 'vcuda-cudart-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let serial = 0;

type Card = { state: string; devices: string };

/**
 * A fresh container: its own limit file and region, on a simulated 4 GiB card of its own unless
 * `card` puts it beside others; `burstMiB` is its burst ceiling (none by default).
 */
function container(coreLimit = 100, contextMiB = 0, opts: { burstMiB?: number; card?: Card } = {}): NodeJS.ProcessEnv {
  const dir = join(tmp, String(++serial));
  execFileSync('mkdir', ['-p', dir]);
  const config = join(dir, 'vcuda.conf');
  writeFileSync(
    config,
    encodeLimitConfig({
      podUid: `pod-${serial}`,
      containerName: 'main',
      regionPath: join(dir, 'region'),
      writtenAtMs: Date.now(),
      devices: [
        {
          uuid: UUID,
          hostIndex: 0,
          mode: 'hard',
          memoryLimitBytes: LIMIT_MIB * MiB,
          coreRequest: coreLimit,
          coreLimit,
          ...(opts.burstMiB ? { memoryBurstLimitBytes: opts.burstMiB * MiB } : {}),
        },
      ],
    }),
  );
  return {
    ...process.env,
    LD_PRELOAD: join(build, 'libvcuda.so'),
    LD_LIBRARY_PATH: join(build, 'fake'),
    FAKEGPU_STATE: opts.card?.state ?? join(dir, 'fakegpu.state'),
    FAKEGPU_DEVICES: opts.card?.devices ?? '1x4096',
    VCUDA_CONFIG: config,
    VCUDA_CONTEXT_OVERHEAD_MIB: String(contextMiB),
  };
}

const binary = conformanceBinary;

/** Runs one case and returns its JSON line; a crash or a setup error fails with its stderr. */
function run(runtime: Runtime, env: NodeJS.ProcessEnv, ...args: string[]): Case {
  return caseOf(spawnSync(binary(runtime), args, { env, encoding: 'utf8', timeout: 60_000 }), args);
}

describe.skipIf(!hasToolkit)(
  `NVIDIA CUDA runtime conformance${hasToolkit ? '' : ` (skipped: ${nvcc} not found)`}`,
  () => {
    beforeAll(() => {
      execFileSync('make', ['-s', '-C', native, 'cudart'], { stdio: 'inherit', timeout: 600_000 });
    }, 600_000);

    describe.each<Runtime>(['shared', 'static'])('%s libcudart', (runtime) => {
      it('sees one device whose memory is the limit', () => {
        expectSeesLimit((...args) => run(runtime, container(), ...args), LIMIT_MIB);
      });

      it('charges the context once, and the views show it', () => {
        const p = run(runtime, container(100, 300), 'props');
        expect(p.totalGlobalMem).toBe(LIMIT_MIB * MiB);
        expect(p.free).toBe((LIMIT_MIB - 300) * MiB);
        const f = run(runtime, container(100, 300), 'fill', 'malloc', '64');
        expect(f.granted).toBe(Math.floor((LIMIT_MIB - 300) / 64) * 64 * MiB);
      });

      it.each(FILL_KINDS)(
        '%s: grants exactly the limit, refuses with cudaErrorMemoryAllocation, leaves nothing',
        (kind) => {
          expectFillsToLimit((...args) => run(runtime, container(), ...args), kind, LIMIT_MIB);
        },
      );

      it('memory a pool keeps stays charged until cudaMemPoolTrimTo gives it back', () => {
        const c = run(runtime, container(), 'pool-cache', '512');
        expect(c.total).toBe(LIMIT_MIB * MiB);
        expect(c.freeCached).toBe((LIMIT_MIB - 512) * MiB);
        expect(c.freeAfter).toBe(LIMIT_MIB * MiB);
        expect(c.allocAfter).toBe(0);
      });

      it('pinned host memory is not charged; copies and memsets run', () => {
        const c = run(runtime, container(), 'copy', '256');
        expect(c.freeWithBuffers).toBe((LIMIT_MIB - 256) * MiB); // only the device buffer counts
        expect(c.hostCopied).toBe(true);
        expect(c.used).toBe(0);
      });

      it('8 racing threads get exactly the limit between them', () => {
        const r = run(runtime, container(), 'race', '8', '32');
        expect(r.granted).toBe(LIMIT_MIB * MiB);
        expect(r.used).toBe(LIMIT_MIB * MiB);
      });

      it('two processes share one budget', async () => {
        const env = container();
        const holder = spawn(binary(runtime), ['hold', '600'], { env, stdio: ['pipe', 'pipe', 'inherit'] });
        const exited = new Promise((done) => holder.once('exit', done));
        try {
          const held = await new Promise<string>((done) => holder.stdout.once('data', (d: Buffer) => done(String(d))));
          expect(JSON.parse(held)).toEqual({ code: 0 });
          expect(run(runtime, env, 'try', '600').code).toBe(CUDA_ERROR_MEMORY_ALLOCATION);
          expect(run(runtime, env, 'try', '400').code).toBe(0);
        } finally {
          holder.stdin.end(); // the holder frees and exits
          await exited;
        }
        expect(run(runtime, env, 'try', String(LIMIT_MIB)).code).toBe(0);
      });

      // Before the node agent's first sample the limiter charges each launch a default cost, so a
      // storm of short kernels is held at the limit's rate even alone (test/compute covers the
      // controller with samples): what this proves is that the runtime's launches reach it.
      it('<<<>>> launches are held by the compute limit', () => {
        const free = run(runtime, container(100), 'launch', '300');
        const limited = run(runtime, container(25), 'launch', '300');
        expect(Number(free.wallMs)).toBeLessThan(100);
        expect(Number(limited.wallMs)).toBeGreaterThan(100);
        expect(Number(limited.wallMs)).toBeGreaterThan(Number(free.wallMs) * 10);
      });

      it('a 1 GiB container bursting to 2 GiB: 1.5 GiB through cudaMalloc, the views show the guarantee, a 1 GiB neighbour on the 2 GiB card gets all of its own', async () => {
        const card = { state: join(tmp, `burst-${runtime}.state`), devices: '1x2048' };
        const burster = spawn(binary(runtime), ['burst', '1536', '513'], {
          env: container(100, 0, { burstMiB: 2048, card }),
          stdio: ['pipe', 'pipe', 'inherit'],
        });
        const lines: string[] = [];
        // 'close', not 'exit': the last line may still be in the pipe when the process has exited.
        const exited = new Promise((done) => burster.once('close', done));
        const first = new Promise<void>((done) =>
          burster.stdout.on('data', (d: Buffer) => {
            lines.push(...String(d).trim().split('\n'));
            done();
          }),
        );
        try {
          await first;
          const b = JSON.parse(lines[0] ?? '{}') as Case;
          expect(b).toMatchObject({
            malloc: 0,
            over: CUDA_ERROR_MEMORY_ALLOCATION,
            asyncOver: CUDA_ERROR_MEMORY_ALLOCATION,
          });
          expect(b.total).toBe(LIMIT_MIB * MiB);
          expect(b.totalGlobalMem).toBe(LIMIT_MIB * MiB);
          expect(b.free).toBe(512 * MiB); // the ceiling leaves 512 MiB beside the 1.5 GiB burst
          expect(b.async).toBe(0); // ...which a stream-ordered allocation may take, within the guarantee
          expect(Number(b.used)).toBe(2048 * MiB); // burst, and the stream-ordered 512 MiB: the card is full
          for (let i = 0; i < 3; i++) {
            expect(run(runtime, container(100, 0, { card }), 'try', String(LIMIT_MIB)).code).toBe(0);
          }
        } finally {
          burster.stdin.end();
          await exited;
        }
        expect(JSON.parse(lines.at(-1) ?? '{}')).toEqual({ freeAfter: LIMIT_MIB * MiB });
      });

      it("pool destroy returns the pool's memory", () => {
        const c = run(runtime, container(), 'pool-destroy', '512');
        expect(c.freeAfter).toBe(LIMIT_MIB * MiB);
      });

      it('cudaFree of an async pointer returns its charge', () => {
        expect(run(runtime, container(), 'free-async', '768').allocAfter).toBe(0);
      });

      it('a graph allocation node cannot exceed the limit', () => {
        const g = run(runtime, container(), 'graph-alloc', String(2 * LIMIT_MIB));
        expect([g.add, g.instantiate, g.launch]).toContain(CUDA_ERROR_MEMORY_ALLOCATION);
        expect(Number(g.used)).toBeLessThanOrEqual(LIMIT_MIB * MiB);
      });

      it("a graph's memory within the limit is granted and charged", () => {
        const g = run(runtime, container(), 'graph-alloc', '512');
        expect([g.add, g.instantiate, g.launch]).toEqual([0, 0, 0]);
        expect(Number(g.free)).toBeLessThanOrEqual((LIMIT_MIB - 512) * MiB);
      });

      it('cudaDeviceReset returns what the context held', () => {
        expect(run(runtime, container(), 'reset', '600', '800').allocAfter).toBe(0);
      });

      it("exec gives the old image's memory back", () => {
        expect(run(runtime, container(), 'exec', '600', '800').code).toBe(0);
      });
    });
  },
);
