/**
 * The node agent's inventory, published on its Node object and read by the extender.
 * Validated with zod at both ends: a malformed inventory makes the node unschedulable for vcuda,
 * never a crash.
 */
import { z } from 'zod';

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

/** Link quality for choosing multi-card sets: higher is better. NVLink beats any PCIe path. */
export function linkScore(link: CardLink): number {
  const pcie = pcieLevels.length - pcieLevels.indexOf(link.pcie); // system 1 .. internal 6
  return link.nvlinks > 0 ? 100 + link.nvlinks : pcie;
}
