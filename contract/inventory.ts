/**
 * The node agent's inventory, published on its Node object and read by the extender.
 * Validated with zod at both ends: a malformed inventory makes the node unschedulable for vcuda,
 * never a crash.
 */
import { z } from 'zod';
import { MIG_PROFILE_PATTERN, MIG_PROFILE_RULE } from './mig-resources.js';

/**
 * PCIe distance between two cards, as NVML's topology levels name it (nearest first):
 * internal (same board), single (one PCIe switch), multiple (several switches),
 * hostbridge (same host bridge), node (same NUMA node), system (across sockets).
 */
export const pcieLevels = ['internal', 'single', 'multiple', 'hostbridge', 'node', 'system'] as const;
export type PcieLevel = (typeof pcieLevels)[number];

export const cardLinkSchema = z.object({
  /** Number of active NVLinks between the two cards (0 when none). */
  nvlinks: z.number().int().min(0),
  pcie: z.enum(pcieLevels),
});

const slice = z.number().int().min(0).max(7);
const count = z.number().int().min(0).max(1_000_000);

/** A GPU-instance profile a card in MIG mode offers, with its legal placements on the 8 memory slices. */
export const migProfileSchema = z.object({
  profileId: count,
  /** NVIDIA's name: `1g.10gb`, `1g.10gb+me`, `3g.40gb` (the `nvidia.com/mig-<name>` resource). */
  profile: z.string().regex(MIG_PROFILE_PATTERN, MIG_PROFILE_RULE),
  computeSlices: z.number().int().min(1).max(8),
  memorySlices: z.number().int().min(1).max(8),
  maxInstances: z.number().int().min(1).max(8),
  sms: count,
  memoryMiB: z.number().int().positive(),
  /** First memory slice of every legal placement, taken or not. */
  placements: z.array(slice).max(8),
});

/** A MIG device that exists on the card: a compute instance in its GPU instance. */
export const migInstanceSchema = z
  .object({
    uuid: z.string().regex(/^MIG-[0-9a-fA-F-]+$/, 'a MIG device UUID such as MIG-1a2b3c4d-...'),
    profile: z.string().min(1).max(64),
    profileId: count,
    gpuInstanceId: count,
    computeInstanceId: count,
    placement: z.object({ start: slice, size: z.number().int().min(1).max(8) }),
    memoryMiB: z.number().int().positive(),
    sms: count,
    /**
     * Served as `vcuda-core`/`vcuda-memory` shares (core 100 = its compute, its memory the
     * instance's), like a small card, and never as a whole `mig-<profile>` instance.
     */
    shared: z.boolean().optional(),
  })
  .refine((i) => i.placement.start + i.placement.size <= 8, { message: 'placement past the 8 memory slices' });

/**
 * MIG on a card. `enabled`: the card is served only as its MIG instances, never whole and never as
 * shares of the full card. Absent: the card has no MIG. `dynamic`: the node agent creates and
 * destroys instances on it for the placements the control plane grants (it may still be in
 * `disabled` mode while it holds nothing); its instances are never offered as free static ones,
 * and it too is never offered whole or as shares.
 */
export const cardMigSchema = z.object({
  mode: z.enum(['enabled', 'disabled']),
  dynamic: z.boolean().optional(),
  profiles: z.array(migProfileSchema).max(32),
  instances: z.array(migInstanceSchema).max(16),
});

export const cardSchema = z.object({
  uuid: z.string().regex(/^GPU-[0-9a-fA-F-]+$/, 'a GPU UUID such as GPU-1a2b3c4d-...'),
  index: z.number().int().min(0),
  model: z.string().min(1),
  memoryMiB: z.number().int().positive(),
  numaNode: z.number().int().min(0).nullable(),
  pciBusId: z.string().min(1),
  healthy: z.boolean(),
  healthReason: z.string().optional(),
  /**
   * Whether libvcuda can serve memory above the request (vcuda-memory-limit) on this card: the card
   * offers concurrent managed access. false: bursts are held to the request; absent: not known.
   */
  memoryBurst: z.boolean().optional(),
  mig: cardMigSchema.optional(),
});

export const nodeInventorySchema = z
  .object({
    version: z.literal(1),
    node: z.string().min(1),
    memoryUnitMiB: z.number().int().positive(),
    cards: z.array(cardSchema),
    /** links[i][j]: the link between cards[i] and cards[j]; a square matrix in card order. */
    links: z.array(z.array(cardLinkSchema)),
    heartbeat: z.iso.datetime(),
  })
  .superRefine((inv, ctx) => {
    const n = inv.cards.length;
    if (inv.links.length !== n || inv.links.some((row) => row.length !== n)) {
      ctx.addIssue({ code: 'custom', path: ['links'], message: `must be a ${n}x${n} matrix, one row per card` });
    }
    const seen = new Set<string>();
    inv.cards.forEach((c, i) => {
      if (seen.has(c.uuid)) ctx.addIssue({ code: 'custom', path: ['cards', i, 'uuid'], message: 'duplicate UUID' });
      seen.add(c.uuid);
    });
  });

export type CardLink = z.infer<typeof cardLinkSchema>;
export type CardInventory = z.infer<typeof cardSchema>;
export type NodeInventory = z.infer<typeof nodeInventorySchema>;
export type CardMigInventory = z.infer<typeof cardMigSchema>;
export type MigProfileInventory = z.infer<typeof migProfileSchema>;

/** Whether the card must not be offered whole or as shares: it is in MIG mode, or kept for dynamic MIG. */
export function servedAsMigOnly(card: Pick<CardInventory, 'mig'>): boolean {
  return card.mig?.mode === 'enabled' || card.mig?.dynamic === true;
}

/** Whether the node agent creates this card's instances on demand (dynamic MIG). */
export function isDynamicMigCard(card: Pick<CardInventory, 'mig'>): boolean {
  return card.mig?.dynamic === true;
}

/** Link quality for choosing multi-card sets: higher is better. NVLink beats any PCIe path. */
export function linkScore(link: CardLink): number {
  const pcie = pcieLevels.length - pcieLevels.indexOf(link.pcie); // system 1 .. internal 6
  return link.nvlinks > 0 ? 100 + link.nvlinks : pcie;
}
