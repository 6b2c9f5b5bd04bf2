/**
 * Runs compute scenarios on the fake GPU, end to end: tenant processes (native/test/compute_client)
 * under the LD_PRELOAD of libvcuda.so with their own limit files, the node agent's card sampler
 * feeding their regions through the fake NVML, and the fake driver's own busy-time accounting
 * (native/test/compute_probe_client) as ground truth. The tenants share the whole fake card, or a
 * MIG instance of it (the card in MIG mode). Shared by the regression tests and the benchmarks.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { encodeLimitConfig } from '../../contract/limit-config.js';
import { regionDeviceOffset, regionOffsets } from '../../contract/region-layout.js';
import type { CounterGuardOptions } from '../../node-agent/card-sampling/counter-guard.js';
import { type DeviceLimitChange, updateLimitsInPlace } from '../../node-agent/compute/limit-update.js';

export type TenantSpec = {
  name: string;
  /** Percent of the card; hard when request == limit. */
  request: number;
  limit: number;
  /** Submission path of compute_client: storm, sync, ex, coop, graph, getproc. */
  path: string;
  /** Blocks per launch; kernel time = ceil(grid / SMs) x wave time. */
  grid: number;
};

/** A shared MIG instance the tenants run in, on the fake H100 80GB (FAKEGPU_DEVICES 1x81559) in MIG
 * mode: a GPU instance of this profile (`nvidia-smi mig -lgip` ID: 9 = 3g.40gb with 60 SMs, 19 =
 * 1g.10gb with 16) and its whole compute instance. */
export type MigInstanceSpec = { profileId: number };

export type ScenarioSpec = {
  /** SMs of the card (a MIG instance has its profile's). */
  sms: number;
  seconds: number;
  tenants: TenantSpec[];
  /** FAKEGPU_KERNEL_US: time of one wave (default 10 µs). */
  waveUs?: number;
  /** What NVML's sample timestamps mark (FAKEGPU_NVML_STAMP): their interval's end (default) or
   * when they were published, late by the delay. */
  nvmlStamp?: 'end' | 'published';
  /** What feeds the limiters: NVML's per-process utilization (default), or libvcuda's in-process
   * sensor with the fake NVML answering NOT_SUPPORTED for per-process utilization, as on MIG. */
  sensor?: 'nvml' | 'in-process';
  /** Run in a MIG instance instead of on the whole card: the tenants and the ground truth are given
   * it by its `MIG-` UUID (FAKEGPU_VISIBLE_DEVICES, what the node agent's CDI spec gives a
   * container as NVIDIA_VISIBLE_DEVICES), the limit files name that UUID, and the sampler watches
   * the parent card, which has no per-process utilization in MIG mode: the in-process sensor is the
   * only source, chosen as the node agent chooses it (`sensor` is not needed). */
  mig?: MigInstanceSpec;
  /** Live limit changes: at `atMs` after the tenants start. */
  changes?: { atMs: number; tenant: string; change: DeviceLimitChange }[];
  /**
   * A tenant that writes its own in-process counter back to 0 (every 10 ms, as a program writing
   * its region would), on a card NVML reads per process, with the node agent's default sensor
   * (in-process) and its counter guard `guard` (counter-guard.ts). `sensor` is not needed.
   */
  tamper?: { tenant: string; guard: CounterGuardOptions };
};

export type ScenarioResult = {
  periodMs: number;
  /** Per tenant: its share (percent) of each fake-driver period, from the tenants' start. */
  shares: Map<string, number[]>;
  /** Launch counts the tenants reported. */
  launches: Map<string, number>;
  /** When the counter guard distrusted the counters, in ms from the tenants' start (undefined: never). */
  distrustedAtMs?: number;
};

/** The probe and the sampler outlive the tenants by at most this much; they are stopped once the
 * tenants' last period is in. */
const PROBE_SLACK_S = 3;
const TAIL_MS = 350;

/** The exit code once the process's output is all read too ('exit' can come before its last line). */
function waitOutput(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => child.on('close', (code) => resolve(code ?? -1)));
}

function waitExit(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.on('exit', (code) => resolve(code ?? -1));
  });
}

function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once('line', (line) => resolve(line));
    child.once('exit', (code) => reject(new Error(`exited (${code}) before its first line`)));
  });
}

/** Writes 0 over device 0's busy-ns counter in a region (none yet: nothing to write). */
function zeroBusyCounter(regionPath: string): void {
  let fd: number;
  try {
    fd = openSync(regionPath, 'r+');
  } catch {
    return;
  }
  try {
    writeSync(fd, Buffer.alloc(8), 0, 8, regionDeviceOffset(0) + regionOffsets.device.busyNs);
  } finally {
    closeSync(fd);
  }
}

/** Creates the MIG instance in a fresh fake state (the card in MIG mode from creation) and returns
 * its `MIG-` UUID. */
function createMigInstance(build: string, env: NodeJS.ProcessEnv, mig: MigInstanceSpec): string {
  const out = execFileSync(join(build, 'fake/fakegpu-ctl'), ['mig-create', '0', String(mig.profileId)], {
    env: { ...env, FAKEGPU_MIG: '0' },
    encoding: 'utf8',
  });
  const uuid = /MIG-\S+/.exec(out)?.[0];
  if (!uuid) throw new Error(`fakegpu-ctl mig-create 0 ${mig.profileId} printed no MIG- UUID: ${out.trim()}`);
  return uuid;
}

export async function runScenario(root: string, spec: ScenarioSpec): Promise<ScenarioResult> {
  const build = join(root, 'native/build');
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-compute-'));
  const baseEnv = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    FAKEGPU_STATE: join(dir, 'fakegpu.state'),
    FAKEGPU_DEVICES: '1x81559',
    FAKEGPU_SMS: String(spec.sms),
    FAKEGPU_SAMPLE_MS: '100',
    FAKEGPU_UTIL_WINDOW_MS: '200',
    // NVML's own sampling, as on a recent GPU (native/COMPUTE.md, "The sensor"): 1/6 s intervals,
    // published 100 ms late, whole percent rounded down. The ground truth stays the 100 ms accounting.
    FAKEGPU_NVML_SAMPLE_MS: '167',
    FAKEGPU_NVML_DELAY_MS: '100',
    FAKEGPU_NVML_STAMP: spec.nvmlStamp ?? 'end',
    FAKEGPU_KERNEL_US: String(spec.waveUs ?? 10),
    // On a MIG card NVML itself has none: nothing is switched off there.
    FAKEGPU_NVML_PROCESS_UTIL: spec.sensor === 'in-process' && !spec.mig && !spec.tamper ? '0' : '1',
    LD_LIBRARY_PATH: join(build, 'fake'),
  };
  const expectedSensor = spec.mig || spec.tamper ? 'in-process' : (spec.sensor ?? 'nvml');
  const children: ChildProcess[] = [];
  try {
    // What the tenants and the ground truth see: the whole card, or only the MIG instance; the
    // sampler (the node agent) sees the node.
    const env = spec.mig
      ? { ...baseEnv, FAKEGPU_VISIBLE_DEVICES: createMigInstance(build, baseEnv, spec.mig) }
      : baseEnv;
    // Ground truth first: it creates the fake state (on a card) and names the device.
    const probe = spawn(join(build, 'test/compute_probe_client'), [String(spec.seconds + PROBE_SLACK_S + 2)], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(probe);
    const periods: { period: number; byPid: Map<number, number> }[] = [];
    let sampleNs = 100e6;
    const header = await firstLine(probe);
    const uuid = /uuid (\S+)/.exec(header)?.[1] ?? '';
    sampleNs = Number(/sample_ns (\d+)/.exec(header)?.[1] ?? sampleNs);
    createInterface({ input: probe.stdout! }).on('line', (line) => {
      const m = /^period (\d+) card (\d+)(.*)$/.exec(line);
      if (!m) return;
      const byPid = new Map<number, number>();
      for (const pair of (m[3] ?? '').trim().split(/\s+/).filter(Boolean)) {
        const [pid, ns] = pair.split(':').map(Number);
        byPid.set(pid as number, (byPid.get(pid as number) ?? 0) + (ns as number));
      }
      periods.push({ period: Number(m[1]), byPid });
    });

    const containers = spec.tenants.map((t) => ({
      key: t.name,
      regionPath: join(dir, `${t.name}.region`),
      deviceIndex: 0,
      configPath: join(dir, `${t.name}.conf`),
    }));
    for (const [i, t] of spec.tenants.entries()) {
      const c = containers[i]!;
      const config = encodeLimitConfig({
        podUid: `pod-${t.name}`,
        containerName: t.name,
        regionPath: c.regionPath,
        writtenAtMs: Date.now(),
        devices: [
          {
            uuid,
            hostIndex: 0,
            mode: t.request === t.limit ? 'hard' : 'soft',
            memoryLimitBytes: 8 * 2 ** 30,
            coreRequest: t.request,
            coreLimit: t.limit,
          },
        ],
      });
      writeFileSync(c.configPath, config);
    }

    const sampler = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(root, 'test/compute/sampler-child.ts'),
        JSON.stringify({
          nvmlPath: join(build, 'fake/libnvidia-ml.so.1'),
          sysfsRoot: join(dir, 'sys'),
          periodMs: 50,
          seconds: spec.seconds + PROBE_SLACK_S,
          containers: containers.map(({ key, regionPath, deviceIndex }) => ({ key, regionPath, deviceIndex })),
          // A node configured for NVML: the in-process scenarios reach that sensor by NVML's
          // NOT_SUPPORTED, the fallback MIG cards take. A tampering scenario runs the node agent's
          // default, the in-process sensor held to NVML by the counter guard.
          sensor: spec.tamper ? 'in-process' : 'nvml',
          ...(spec.tamper ? { counterGuard: spec.tamper.guard } : {}),
        }),
      ],
      { cwd: root, env: baseEnv, stdio: ['pipe', 'pipe', 'inherit'] },
    );
    children.push(sampler);
    const ready = await firstLine(sampler);
    if (ready !== `ready ${expectedSensor}`)
      throw new Error(`sampler said "${ready}", expected "ready ${expectedSensor}"`);

    const tenants = spec.tenants.map((t, i) => {
      const child = spawn(join(build, 'test/compute_client'), [t.path, String(t.grid), String(spec.seconds)], {
        env: { ...env, LD_PRELOAD: join(build, 'libvcuda.so'), VCUDA_CONFIG: containers[i]!.configPath },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.push(child);
      sampler.stdin!.write(`${JSON.stringify({ key: t.name, pids: [child.pid] })}\n`);
      return child;
    });
    // The first period that starts after the tenants were spawned.
    const firstPeriod = (periods.at(-1)?.period ?? 0) + 1;
    const startedAt = performance.now();
    let distrustedAtMs: number | undefined;
    createInterface({ input: sampler.stdout! }).on('line', (line) => {
      if (line === 'distrusted') distrustedAtMs ??= performance.now() - startedAt;
    });
    const tampered = containers.find((c) => c.key === spec.tamper?.tenant);
    const tamper = tampered ? setInterval(() => zeroBusyCounter(tampered.regionPath), 10) : undefined;
    const timers = (spec.changes ?? []).map((ch) =>
      setTimeout(() => {
        const c = containers[spec.tenants.findIndex((t) => t.name === ch.tenant)]!;
        updateLimitsInPlace(c.configPath, new Map([[0, ch.change]]), Date.now());
      }, ch.atMs),
    );
    const launches = new Map<string, number>();
    const outputs = tenants.map((child, i) => {
      let text = '';
      child.stdout!.on('data', (d: Buffer) => {
        text += d.toString();
      });
      return waitOutput(child).then((code) => {
        if (code !== 0) throw new Error(`tenant ${spec.tenants[i]!.name} exited with ${code}`);
        launches.set(spec.tenants[i]!.name, Number(/launches (\d+)/.exec(text)?.[1] ?? 0));
      });
    });
    await Promise.all(outputs);
    timers.forEach(clearTimeout);
    clearInterval(tamper);
    await new Promise((r) => setTimeout(r, TAIL_MS));
    sampler.kill('SIGTERM');
    probe.kill('SIGTERM');
    await Promise.all([waitExit(sampler), waitExit(probe)]);
    const lastPeriod = firstPeriod + Math.floor((spec.seconds * 1e9) / sampleNs);

    const shares = new Map<string, number[]>();
    for (const [i, t] of spec.tenants.entries()) {
      const pid = tenants[i]!.pid!;
      shares.set(
        t.name,
        periods
          .filter((p) => p.period >= firstPeriod && p.period < lastPeriod)
          .map((p) => ((p.byPid.get(pid) ?? 0) / sampleNs) * 100),
      );
    }
    return { periodMs: sampleNs / 1e6, shares, launches, ...(distrustedAtMs === undefined ? {} : { distrustedAtMs }) };
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Mean share (percent) of each window of `windowMs` after `warmupMs`. */
export function windowMeans(result: ScenarioResult, tenant: string, warmupMs: number, windowMs: number): number[] {
  const perWindow = Math.round(windowMs / result.periodMs);
  const skip = Math.round(warmupMs / result.periodMs);
  const series = (result.shares.get(tenant) ?? []).slice(skip);
  const means: number[] = [];
  for (let at = 0; at + perWindow <= series.length; at += perWindow) {
    const w = series.slice(at, at + perWindow);
    means.push(w.reduce((a, b) => a + b, 0) / perWindow);
  }
  return means;
}
