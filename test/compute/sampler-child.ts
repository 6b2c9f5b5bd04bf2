/**
 * The node agent's compute sampler as its own process, for the fake-GPU tests and benchmark:
 * the fake NVML reads FAKEGPU_* once per process, so each scenario gets a fresh one. Reads its
 * settings from argv[2] (JSON), chooses the card's sensor as the node agent does (its `sensor`
 * setting, in-process where NVML has no per-process utilization), prints "ready <sensor>", then takes `{"key": …, "pids": […]}` lines on
 * stdin as tenants start, samples every period and exits after `seconds` (or when killed), printing
 * how the in-process counters compared with NVML's device utilization over 1 s windows
 * (counter-guard.ts; observed only here, so the card is never switched to NVML mid-scenario).
 */
import { createInterface } from 'node:readline';
import type { CardSamplerOptions, ContainerOnCard } from '../../node-agent/card-sampling/card-sampler.js';
import { type ComputeSensor, createComputeSampler } from '../../node-agent/card-sampling/compute-sensor.js';
import type { CounterGuardOptions, CounterGuardVerdict } from '../../node-agent/card-sampling/counter-guard.js';
import { NvmlGpuSource } from '../../node-agent/nvml/nvml-gpu-source.js';

type Settings = {
  nvmlPath: string;
  sysfsRoot: string;
  periodMs: number;
  seconds: number;
  containers: ContainerOnCard[];
  /** The node's computeSensor setting (absent: the agent's default); the GPU scripts compare the two. */
  sensor?: ComputeSensor;
  /** `device`: the card's busy share floored at NVML's device utilization (`cardBusyFromDevice`). */
  cardBusy?: 'counters' | 'device';
  /** The counter guard as a node runs it; absent: observed only, over 1 s windows, never tripped. */
  counterGuard?: CounterGuardOptions;
};

const settings = JSON.parse(process.argv[2] ?? '{}') as Settings;
const owners = new Map<number, string>();
const checks: CounterGuardVerdict[] = [];
const source = new NvmlGpuSource({ libraryPath: settings.nvmlPath, sysfsRoot: settings.sysfsRoot });
const samplerOptions: CardSamplerOptions = {
  cardIndex: 0,
  periodMs: settings.periodMs,
  source,
  nowMs: Date.now,
  placement: { containersOn: () => settings.containers, containerOfPid: (pid) => owners.get(pid) ?? null },
  onError: (err) => process.stderr.write(`sampler: ${String(err)}\n`),
  onCounterCheck: (v) => {
    // The moment the guard distrusts the counters, so a scenario judges from there.
    if (v.distrusted && !checks.some((c) => c.distrusted)) process.stdout.write('distrusted\n');
    checks.push(v);
  },
  counterGuard: settings.counterGuard ?? { windowMs: 1000, windows: Number.MAX_SAFE_INTEGER },
  cardBusyFromDevice: settings.cardBusy === 'device',
};
const { sampler, sensor } = createComputeSampler(samplerOptions, settings.sensor);

createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line) as { key: string; pids: number[] };
  for (const pid of msg.pids) owners.set(pid, msg.key);
});
/** One line: the windows in which some tenant ran, NVML's busy share against the counters'. */
function counterSummary(): string {
  const busy = checks.filter((c) => c.deviceBp > 0 || c.countersBp > 0);
  if (busy.length === 0) return 'counter check: no busy window';
  const mean = (f: (c: CounterGuardVerdict) => number) => busy.reduce((s, c) => s + f(c), 0) / busy.length / 100;
  const worst = Math.max(...busy.map((c) => c.unaccountedBp)) / 100;
  return `counter check: ${busy.length} busy windows of ${(settings.counterGuard?.windowMs ?? 1000) / 1000} s, NVML device ${mean((c) => c.deviceBp).toFixed(1)} %, counters ${mean((c) => c.countersBp).toFixed(1)} %, unaccounted ${mean((c) => c.unaccountedBp).toFixed(1)} % (worst ${worst.toFixed(1)} %)`;
}

function finish(): void {
  sampler.stop();
  source.close();
  process.stdout.write(`${counterSummary()}\n`);
  process.exit(0);
}

sampler.start();
process.stdout.write(`ready ${sensor}\n`);
process.on('SIGTERM', finish);
setTimeout(finish, settings.seconds * 1000);
