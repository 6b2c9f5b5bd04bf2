/**
 * The device minors of MIG's access capabilities, `/dev/nvidia-caps/nvidia-cap<N>`: one per GPU
 * instance (`gpu<minor>/gi<G>/access`) and one per compute instance (`gpu<minor>/gi<G>/ci<C>/access`),
 * keyed by the parent's device minor (nvmlDeviceGetMinorNumber), not its NVML index. A container
 * given a MIG device needs both nodes beside its parent's `/dev/nvidiaN`.
 *
 * The driver lists every minor in `/proc/driver/nvidia-caps/mig-minors` (`gpu0/gi0/access 3`).
 * Their layout is fixed by the driver: `config` 1, `monitor` 2, then for each GPU minor 0..31 its
 * 15 GPU instances, each taking 9 minors (its own access, then compute instances 0..7); NVIDIA's
 * documentation ends the file at `gpu31/gi14/ci7/access 4322`. The file is read where it exists;
 * a node without it (the fake driver has none) gets the layout.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const GPU_INSTANCES_PER_GPU = 15;
const COMPUTE_INSTANCES_PER_GI = 8;
const MINORS_PER_GI = 1 + COMPUTE_INSTANCES_PER_GI;
const FIRST_GPU_MINOR = 3;
const MAX_GPU_MINOR = 31;

/** The minor of a GPU instance's access node (`ci` absent) or of one of its compute instances'. */
export type CapMinorOf = (gpuMinor: number, gpuInstanceId: number, computeInstanceId?: number) => number | undefined;

export function capName(gpuMinor: number, gpuInstanceId: number, computeInstanceId?: number): string {
  const gi = `gpu${gpuMinor}/gi${gpuInstanceId}`;
  return computeInstanceId === undefined ? `${gi}/access` : `${gi}/ci${computeInstanceId}/access`;
}

/** The driver's fixed layout of the minors. */
export const layoutCapMinor: CapMinorOf = (gpuMinor, gi, ci) => {
  const inRange = (n: number, max: number) => Number.isInteger(n) && n >= 0 && n <= max;
  if (!inRange(gpuMinor, MAX_GPU_MINOR) || !inRange(gi, GPU_INSTANCES_PER_GPU - 1)) return undefined;
  if (ci !== undefined && !inRange(ci, COMPUTE_INSTANCES_PER_GI - 1)) return undefined;
  const giMinor = FIRST_GPU_MINOR + (gpuMinor * GPU_INSTANCES_PER_GPU + gi) * MINORS_PER_GI;
  return ci === undefined ? giMinor : giMinor + 1 + ci;
};

/** `mig-minors` as the driver writes it: one `<capability> <minor>` per line; other lines are skipped. */
export function parseMigMinors(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\s*(\S+)\s+(\d+)\s*$/.exec(line);
    if (m) out.set(m[1] as string, Number(m[2]));
  }
  return out;
}

/** Where the driver lists the minors, under the agent's `/proc`. */
export function migMinorsPath(procRoot: string): string {
  return join(procRoot, 'driver', 'nvidia-caps', 'mig-minors');
}

/** The minors from the driver's file under `procRoot` when it can be read, else the layout. */
export function readCapMinors(
  procRoot: string,
  read: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): { source: 'driver' | 'layout'; minorOf: CapMinorOf } {
  let text: string;
  try {
    text = read(migMinorsPath(procRoot));
  } catch {
    // No driver file (no MIG-capable driver, or the fake): the minors follow the driver's layout.
    return { source: 'layout', minorOf: layoutCapMinor };
  }
  const table = parseMigMinors(text);
  return { source: 'driver', minorOf: (gpu, gi, ci) => table.get(capName(gpu, gi, ci)) };
}
