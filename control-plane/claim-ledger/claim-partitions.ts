/**
 * The ledger rows a claim's MIG partition holds (pure over the node's inventory as the control
 * plane read it): the same rows the extender holds for a MIG grant on that card, so one card has
 * one representation in the ledger whichever mode placed on it, and a team's quota counts a
 * partition as it counts the extender's instance.
 *
 * - A card kept for dynamic MIG (inventory `mig.dynamic`) is its 8 memory slice cards
 *   (`<parent>/mig-slice-<k>`, registered by LedgerNodes): a partition holds each slice it covers
 *   (its slice's core, all its memory), its instance made at Prepare or already there (contract's
 *   ledgerUseOfGrant). Two claims for overlapping placements, in two clusters, meet the ledger's
 *   per-card rule on memory.
 * - Any other card in MIG mode is its instances, each a card of its own (its `MIG-` UUID): the
 *   partition is the instance at that placement, held whole: all its memory, charged the part of
 *   the parent card it spans (contract's migSpanCore).
 */
import {
  draMigDeviceName,
  type GrantUse,
  ledgerUseOfGrant,
  MIG_MEMORY_SLICES,
  migPlacementKey,
} from '../../contract/index.js';
import type { NodeInventoryRead } from '../placement/cluster-snapshot.js';

/** One ledger row a partition holds. */
export type PartitionRow = { cardUuid: string; core: number; memoryMiB: number };

/** What of a node's inventory the rows are found in. */
export type PartitionNode = Pick<NodeInventoryRead, 'name' | 'migInstances' | 'dynamicMig'>;

/** A partition's rows are the ledger's rows for the whole instance the extender would grant there. */
function rowsOf(grant: GrantUse): PartitionRow[] {
  return ledgerUseOfGrant(grant).map((u) => ({ cardUuid: u.uuid, core: u.core, memoryMiB: u.memoryMiB }));
}

/** The rows the partition `device` holds on `node`, or why it has none. */
export function partitionRowsOf(node: PartitionNode, device: string): PartitionRow[] | string {
  const instance = node.migInstances.find((m) => draMigDeviceName(m.parentIndex, m.profile, m.start) === device);
  if (instance) {
    const mig = { parent: instance.parentUuid, start: instance.start, size: instance.size };
    return rowsOf({ uuid: instance.uuid, core: 100, memoryMiB: instance.memoryMiB, mig });
  }
  for (const card of node.dynamicMig) {
    const shapes = card.allProfiles ?? card.profiles;
    for (let start = 0; start < MIG_MEMORY_SLICES; start++) {
      const shape = shapes.find((p) => draMigDeviceName(card.index, p.profile, start) === device);
      if (!shape) continue;
      const mig = { parent: card.uuid, start, size: shape.memorySlices, dynamic: true as const };
      const uuid = migPlacementKey({ parent: card.uuid, profile: shape.profile, start });
      return rowsOf({
        uuid,
        core: 100,
        memoryMiB: shape.memoryMiB,
        mig: { ...mig, sliceMemoryMiB: card.sliceMemoryMiB },
      });
    }
  }
  return `MIG partition ${device} is not in node ${node.name}'s inventory (no instance or dynamic-MIG card of that profile and placement)`;
}
