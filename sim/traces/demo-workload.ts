/**
 * What `vcuda local` runs when no workload file is given: inference shares (some with a soft
 * compute limit), whole-card training, a team that runs into its quota, short batch jobs that
 * come and go, and requests admission refuses, so every path shows up on the dashboard. Pods
 * keep their cards busy at different duty cycles (inference above its compute limit, so the
 * limiter shows; embeddings and notebooks idle, so the idle report has entries).
 */
import { parseWorkloadSpec, type WorkloadSpec } from './workload-spec.js';

/** Quota of the team that goes over it (core hundredths, MiB). */
export const DEMO_QUOTAS = { 'team-c': { core: 100, memoryMiB: 81920 } };

/**
 * `cudaCommand(limitMiB, allocMiB, busyPercent)` is the program a demo pod runs; memory amounts
 * are MiB, written in the cluster's memory units (`memoryUnitMiB`, 256 for gpu-manager
 * compatibility); `busyPercent` is the share of time it launches kernels (0: holds memory, idle).
 */
export function demoWorkload(
  cudaCommand: (limitMiB: number, allocMiB: number, busyPercent: number) => string[] | undefined,
  memoryUnitMiB = 1,
): WorkloadSpec {
  const cmd = (mib: number, busyPercent: number, allocMiB = Math.floor(mib / 2)) => {
    const c = cudaCommand(mib, allocMiB, busyPercent);
    return c ? { command: c } : {};
  };
  const units = (mib: number) => Math.max(1, Math.round(mib / memoryUnitMiB));
  const pods: { memory?: number; [key: string]: unknown }[] = [
    { name: 'infer', namespace: 'team-a', count: 12, core: 25, memory: 16384, intervalSeconds: 0.5, ...cmd(16384, 60) },
    {
      name: 'chat',
      namespace: 'team-a',
      count: 4,
      core: 20,
      memory: 8192,
      coreLimit: 60,
      intervalSeconds: 0.5,
      ...cmd(8192, 40),
    },
    {
      name: 'embed',
      namespace: 'team-b',
      count: 8,
      core: 10,
      memory: 4096,
      arriveAtSeconds: 2,
      intervalSeconds: 0.5,
      ...cmd(4096, 0),
    },
    { name: 'train', namespace: 'team-b', count: 4, core: 200, arriveAtSeconds: 3, intervalSeconds: 1 },
    {
      name: 'notebook',
      namespace: 'team-c',
      count: 4,
      core: 50,
      memory: 20480,
      arriveAtSeconds: 4,
      intervalSeconds: 1,
      ...cmd(20480, 0),
    },
    {
      name: 'batch',
      namespace: 'team-b',
      count: 12,
      core: 30,
      memory: 8192,
      arriveAtSeconds: 6,
      intervalSeconds: 3,
      durationSeconds: 20,
      ...cmd(8192, 90),
    },
    // Asks for twice its memory limit: its log shows the allocation refused at the limit.
    { name: 'greedy', namespace: 'team-a', core: 10, memory: 2048, arriveAtSeconds: 5, ...cmd(2048, 0, 4096) },
    { name: 'bad-core', namespace: 'team-a', core: 150, memory: 1024, arriveAtSeconds: 5 },
    { name: 'no-memory', namespace: 'team-b', core: 30, arriveAtSeconds: 7 },
  ];
  return parseWorkloadSpec({
    pods: pods.map((p) => (p.memory === undefined ? p : { ...p, memory: units(p.memory) })),
  });
}
