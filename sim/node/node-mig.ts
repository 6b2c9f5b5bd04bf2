/**
 * A simulated node's static MIG layout, made before its agent starts as an operator makes it with
 * `nvidia-smi mig -cgi <profile> -C` (or NVIDIA's MIG manager) before the device plugin runs: for
 * each card the cluster description puts in MIG mode, its instances in order, each a GPU instance
 * and its whole compute instance, through the fake driver's own tool (`fakegpu-ctl mig-create`).
 * Profile names are turned into IDs with the node's NVML, as nvidia-smi does. The instances live
 * in the node's state file, so a restarted agent finds them; a card that has instances already is
 * left as it is.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseMigInstance, type SimNode } from '../cluster-spec.js';
import { openNodeNvml } from './node-nvml.js';

/** `env`: the fake driver's description of the node (sim-node.ts `nodeDriverEnv`). */
export function createStaticMigInstances(
  node: SimNode,
  root: string,
  nativeBuildDir: string,
  env: Record<string, string>,
): void {
  if (node.group.mig.every((m) => m.instances.length === 0)) return;
  const nvml = openNodeNvml(node, root, nativeBuildDir, env);
  if (!nvml) throw new Error(`${node.name}: MIG instances need the fake driver (make -C native)`);
  const ctl = join(nativeBuildDir, 'fake', 'fakegpu-ctl');
  try {
    for (const { card, instances } of node.group.mig) {
      const layout = nvml.migLayout(card);
      const where = `${node.name} card ${card} (${node.cards[card]?.memoryMiB} MiB)`;
      if (layout?.mode !== 'enabled') {
        throw new Error(
          `${where}: the fake driver has no MIG on this card; MIG needs an H100 80GB (76000-86000 MiB) or H200 141GB (130000-150000 MiB) card`,
        );
      }
      if (layout.instances.length > 0) continue;
      for (const text of instances) {
        const { profile, start } = parseMigInstance(text);
        const id = layout.profiles.find((p) => p.profile === profile)?.profileId;
        if (id === undefined) {
          throw new Error(
            `${where}: no MIG profile ${profile} (it has ${layout.profiles.map((p) => p.profile).join(', ')})`,
          );
        }
        const args = ['mig-create', String(card), String(id), ...(start === undefined ? [] : [String(start)])];
        try {
          execFileSync(ctl, args, { env: { ...process.env, ...env }, stdio: 'pipe' });
        } catch (err) {
          const why = (err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message;
          throw new Error(`${where}: creating MIG ${text} failed: ${why}`);
        }
      }
    }
  } finally {
    nvml.close();
  }
}
