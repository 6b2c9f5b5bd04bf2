/**
 * The node agent's compute sampler as its own process, for the fake-GPU tests and benchmark:
 * the fake NVML reads FAKEGPU_* once per process, so each scenario gets a fresh one. Reads its
 * settings from argv[2] (JSON), chooses the card's sensor as the node agent does (its `sensor`
 * setting, in-process where NVML has no per-process utilization), prints "ready <sensor>", then takes `{"key": …, "pids": […]}` lines on
 * stdin as tenants start, samples every period and exits after `seconds`.
 */
import { createInterface } from 'node:readline';
import type { CardSamplerOptions, ContainerOnCard } from '../../node-agent/card-sampling/card-sampler.js';
import { type ComputeSensor, createComputeSampler } from '../../node-agent/card-sampling/compute-sensor.js';
import { NvmlGpuSource } from '../../node-agent/nvml/nvml-gpu-source.js';

type Settings = {
  nvmlPath: string;
  sysfsRoot: string;
  periodMs: number;
  seconds: number;
  containers: ContainerOnCard[];
  /** The node's computeSensor setting (absent: the agent's default); the GPU scripts compare the two. */
  sensor?: ComputeSensor;
};

const settings = JSON.parse(process.argv[2] ?? '{}') as Settings;
const owners = new Map<number, string>();
const source = new NvmlGpuSource({ libraryPath: settings.nvmlPath, sysfsRoot: settings.sysfsRoot });
const samplerOptions: CardSamplerOptions = {
  cardIndex: 0,
  periodMs: settings.periodMs,
  source,
  nowMs: Date.now,
  placement: { containersOn: () => settings.containers, containerOfPid: (pid) => owners.get(pid) ?? null },
  onError: (err) => process.stderr.write(`sampler: ${String(err)}\n`),
};
const { sampler, sensor } = createComputeSampler(samplerOptions, settings.sensor);

createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line) as { key: string; pids: number[] };
  for (const pid of msg.pids) owners.set(pid, msg.key);
});
sampler.start();
process.stdout.write(`ready ${sensor}\n`);
setTimeout(() => {
  sampler.stop();
  source.close();
  process.exit(0);
}, settings.seconds * 1000);
