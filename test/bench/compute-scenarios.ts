/**
 * What the compute benchmarks share: scenarios on the fake GPU (fake-card.ts), on a whole card or
 * in a MIG instance, and the figures taken from each, MAE of the achieved share over 1 s windows
 * after a 2 s warm-up and achieved share over limit (and over request where a soft tenant must
 * keep it).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  type MigInstanceSpec,
  runScenario,
  type ScenarioSpec,
  type TenantSpec,
  windowMeans,
} from '../compute/fake-card.js';
import { atLeast, atMost, type BenchContext, type Figure } from './harness.js';

export const SECONDS = 6;
const WARMUP_MS = 2000;
const WINDOW_MS = 1000;

export type Scenario = {
  label: string;
  spec: Omit<ScenarioSpec, 'sms' | 'seconds' | 'mig'>;
  /** Target share (percent) per tenant. */
  targets: Record<string, number>;
  /** Tenants alone on the card whose achieved/limit must reach 0.96. */
  lone?: string[];
  /** Tenants that must keep their request under contention. */
  keepsRequest?: string[];
};

/** Where a scenario's tenants run. */
export type BenchDevice = {
  /** In figure names: `16 SMs`, `MIG 3g.40gb (60 SMs)`. */
  label: string;
  /** SMs the tenants see (kernel lengths in the scenarios follow them). */
  sms: number;
  /** The card, and the MIG instance on it if any. */
  placement: Pick<ScenarioSpec, 'sms' | 'mig'>;
};

/** The fake H100 80GB's SMs (the card a MIG instance is made on). */
const H100_SMS = 132;

export const wholeCard = (sms: number): BenchDevice => ({ label: `${sms} SMs`, sms, placement: { sms } });

/** A shared MIG instance of GPU-instance profile `mig.profileId` (`profile` and `sms` as the
 * profile table has them, native/README.md "MIG") on the fake H100 80GB in MIG mode. */
export const migInstance = (profile: string, sms: number, mig: MigInstanceSpec): BenchDevice => ({
  label: `MIG ${profile} (${sms} SMs)`,
  sms,
  placement: { sms: H100_SMS, mig },
});

export const hard = (name: string, pct: number, path: string, grid: number): TenantSpec => ({
  name,
  request: pct,
  limit: pct,
  path,
  grid,
});

/** Blocks for a kernel of about `ms` on a card of `sms` SMs at 10 µs per wave. */
const gridFor = (ms: number, sms: number) => Math.round((ms * 1000) / 10) * sms;

/** The compute benchmark's scenarios on a card of `sms` SMs. */
export function computeScenarios(sms: number): Scenario[] {
  const lone = [10, 30, 50, 70, 90].map((pct) => ({
    label: `lone hard ${pct}%`,
    spec: { tenants: [hard('t', pct, 'storm', 264)] },
    targets: { t: pct },
    lone: ['t'],
  }));
  return [
    ...lone,
    {
      label: 'two hard 30/70',
      spec: { tenants: [hard('a', 30, 'storm', 264), hard('b', 70, 'storm', 528)] },
      targets: { a: 30, b: 70 },
    },
    {
      label: 'soft 30..60 alone (bursts to limit)',
      spec: { tenants: [{ name: 's', request: 30, limit: 60, path: 'storm', grid: 264 }] },
      targets: { s: 60 },
      lone: ['s'],
    },
    {
      label: 'soft 30..60 + hard 70 (keeps request)',
      spec: {
        tenants: [{ name: 's', request: 30, limit: 60, path: 'storm', grid: 264 }, hard('c', 70, 'storm', 264)],
      },
      targets: { s: 30, c: 70 },
      keepsRequest: ['s'],
    },
    {
      label: 'big kernel + synchronize, hard 40%',
      spec: { tenants: [hard('k', 40, 'sync', gridFor(20, sms))] },
      targets: { k: 40 },
      lone: ['k'],
    },
    {
      label: 'tiny-kernel storm (2 µs), hard 25%',
      spec: { tenants: [hard('m', 25, 'storm', 1)], waveUs: 2 },
      targets: { m: 25 },
      lone: ['m'],
    },
  ];
}

export function buildNative(root: string, log: (line: string) => void): void {
  const targets = [
    'build/libvcuda.so',
    'build/fake/libcuda.so.1',
    'build/fake/libnvidia-ml.so.1',
    'build/fake/fakegpu-ctl',
    'build/test/compute_client',
    'build/test/compute_probe_client',
  ];
  const r = spawnSync('make', ['-s', '-C', join(root, 'native'), ...targets], { stdio: 'inherit' });
  if (r.status === 0) return;
  // A tree where another part of native/ does not build yet can still measure with the last
  // good build; say so loudly rather than refuse.
  const missing = targets.filter((t) => !existsSync(join(root, 'native', t)));
  if (missing.length > 0) throw new Error(`make -C native failed and ${missing.join(', ')} are missing`);
  log('WARNING: make -C native failed; measuring with the binaries of the last successful build');
}

/** Runs one scenario on `device` and returns its figures, named `label · device`. */
export async function measureScenario(
  ctx: BenchContext,
  s: Scenario,
  device: BenchDevice,
  suffix = '',
): Promise<Figure[]> {
  const scenario = `${s.label} · ${device.label}${suffix}`;
  const result = await runScenario(ctx.root, { ...s.spec, ...device.placement, seconds: SECONDS });
  const figures: Figure[] = [];
  const errors: number[] = [];
  const notes: string[] = [];
  for (const t of s.spec.tenants) {
    const target = s.targets[t.name] ?? t.limit;
    const windows = windowMeans(result, t.name, WARMUP_MS, WINDOW_MS);
    errors.push(...windows.map((w) => Math.abs(w - target)));
    const mean = windows.reduce((a, b) => a + b, 0) / Math.max(1, windows.length);
    notes.push(`${t.name} ${windows.map((w) => w.toFixed(1)).join('/')}`);
    const overLimit = mean / t.limit;
    const isLone = s.lone?.includes(t.name) ?? false;
    figures.push({
      name: 'achieved_over_limit',
      value: Number(overLimit.toFixed(4)),
      unit: 'ratio',
      scenario: s.spec.tenants.length > 1 ? `${scenario} [${t.name}]` : scenario,
      ...(isLone ? atLeast(overLimit, 0.96) : {}),
    });
    if (s.keepsRequest?.includes(t.name)) {
      const overRequest = mean / t.request;
      figures.push({
        name: 'achieved_over_request',
        value: Number(overRequest.toFixed(4)),
        unit: 'ratio',
        scenario: `${scenario} [${t.name}]`,
        ...atLeast(overRequest, 0.96),
      });
    }
  }
  const mae = errors.reduce((a, b) => a + b, 0) / Math.max(1, errors.length);
  figures.push({ name: 'mae_pp', value: Number(mae.toFixed(3)), unit: 'pp', scenario, ...atMost(mae, 2) });
  ctx.log(`${scenario}: MAE ${mae.toFixed(2)} pp (${notes.join('; ')})`);
  return figures;
}
