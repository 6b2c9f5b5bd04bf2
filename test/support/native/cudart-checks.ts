/**
 * The CUDA runtime conformance assertions (native/test/cudart/conformance.cu over the fake driver),
 * written once and run wherever a container configuration must be proven: by native/test's
 * cudart.test.ts on a limit file it writes itself, and by the node agent's DRA test on the
 * configuration a Prepare produced. A check gets a runner that starts one conformance case in the
 * container under test and returns its JSON line.
 */
import type { SpawnSyncReturns } from 'node:child_process';
import { join, resolve } from 'node:path';
import { expect } from 'vitest';

export const MiB = 2 ** 20;
export const CUDA_ERROR_MEMORY_ALLOCATION = 2; // cudaErrorMemoryAllocation

export type CudartRuntime = 'shared' | 'static';
export type Case = Record<string, number | string>;
/** Runs one conformance case (`props`, `fill malloc 64`, …) in the container under test. */
export type CaseRunner = (...args: string[]) => Case;

/** Allocation paths `fill` exercises. */
export const FILL_KINDS = ['malloc', 'managed', 'async', 'pool', 'pitch', 'array'] as const;

export function conformanceBinary(runtime: CudartRuntime): string {
  return join(resolve(import.meta.dirname, '../../..'), 'native/build/cudart', `conformance-${runtime}`);
}

/** A case's JSON line (its last line of output); a crash or a setup error fails with its stderr. */
export function caseOf(r: SpawnSyncReturns<string>, args: readonly string[]): Case {
  const line = r.stdout.trim().split('\n').pop() ?? '';
  if (!line.startsWith('{')) throw new Error(`${args.join(' ')}: exit ${r.status}\n${r.stderr}`);
  return JSON.parse(line) as Case;
}

/** One device whose memory is the limit: cudaGetDeviceProperties and cudaMemGetInfo show the slice. */
export function expectSeesLimit(run: CaseRunner, limitMiB: number): void {
  const p = run('props');
  expect(p).toMatchObject({ count: 1, driver: 13000, runtime: 13000, major: 9 });
  expect(p.totalGlobalMem).toBe(limitMiB * MiB);
  expect(p.total).toBe(limitMiB * MiB);
  expect(p.free).toBe(limitMiB * MiB);
}

/** Allocation of `kind` grants exactly the limit, then the runtime's own out-of-memory error, and leaves nothing. */
export function expectFillsToLimit(run: CaseRunner, kind: string, limitMiB: number): void {
  const f = run('fill', kind, '64');
  expect(f.granted).toBe(limitMiB * MiB);
  expect(f.refused).toBe(CUDA_ERROR_MEMORY_ALLOCATION);
  expect(f.atRefusal).toBe(Number(f.before) + limitMiB * MiB); // the refused call reached no card
  expect(f.after).toBe(f.before);
}
