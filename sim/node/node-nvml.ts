/**
 * The fake NVML of one simulated node, loaded into the process that runs every node's agent: the
 * node agent reads utilization through the real koffi binding (`NvmlGpuSource`), over the state
 * file the node's containers write. The fake driver takes its node description from the
 * environment once per loaded library (FAKEGPU_STATE, FAKEGPU_DEVICES, …), so each node loads its
 * own copy of the library, with its own description in the environment while NVML initialises.
 */
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { NvmlGpuSource } from '../../node-agent/nvml/nvml-gpu-source.js';
import type { SimNode } from '../cluster-spec.js';

const FAKE_NVML = 'libnvidia-ml.so.1';

/** Runs `fn` with `vars` in process.env (a key mapped to undefined is removed), then restores it. */
function withEnv<T>(vars: Record<string, string | undefined>, fn: () => T): T {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const apply = (v: Record<string, string | undefined>) => {
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) delete process.env[k];
      else process.env[k] = x;
    }
  };
  apply(vars);
  try {
    return fn();
  } finally {
    apply(saved);
  }
}

/**
 * NVML over the node's fake driver, every card of the node visible in node order (the host's
 * view, as the node agent has it); undefined when the fake driver is not built or the node has
 * no card.
 */
export function openNodeNvml(
  node: SimNode,
  root: string,
  nativeBuildDir: string,
  driverEnv: Record<string, string>,
): NvmlGpuSource | undefined {
  const built = join(nativeBuildDir, 'fake', FAKE_NVML);
  if (node.cards.length === 0 || !existsSync(built)) return undefined;
  const dir = join(root, 'nvml');
  mkdirSync(dir, { recursive: true });
  const own = join(dir, FAKE_NVML);
  // Once per node: a loaded library keeps the description it read, so a restarted agent reuses it.
  if (!existsSync(own)) copyFileSync(built, own);
  return withEnv({ ...driverEnv, FAKEGPU_VISIBLE_DEVICES: undefined }, () => {
    return new NvmlGpuSource({ libraryPath: own, sysfsRoot: join(root, 'sys') });
  });
}
