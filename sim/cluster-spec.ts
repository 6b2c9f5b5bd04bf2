/**
 * The description of a simulated cluster, shared by `vcuda local` and `vcuda whatif`:
 * node groups with their cards, labels and taints, and optional namespace quotas. Cards get
 * stable UUIDs and a realistic topology (NVLink inside a NUMA node, PCIe across) so placement
 * decisions are the ones a real machine would get.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import {
  type CardInventory,
  type CardLink,
  type FieldError,
  fieldError,
  fieldErrorsFromZod,
  type NodeInventory,
  parseManifestText,
  ValidationError,
} from '../contract/index.js';

/** A static MIG instance of the cluster description: `3g.40gb`, or `3g.40gb@4` at memory slice 4. */
const MIG_INSTANCE_PATTERN = /^[0-9]+g\.[0-9]+gb(\+[a-z]+)?(@[0-7])?$/;

const nodeGroupSchema = z.object({
  /** Node names are `<namePrefix>-<i>` (from 0), or exactly `name` when count is 1. */
  namePrefix: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    .default('gpu-node'),
  name: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
    .optional(),
  count: z.number().int().min(1).max(1000).default(1),
  cards: z.number().int().min(0).max(16).default(8),
  model: z.string().min(1).default('NVIDIA A100-SXM4-80GB'),
  memoryMiB: z.number().int().positive().default(81920),
  numaNodes: z.number().int().min(1).max(8).default(2),
  /** NVLink between the cards of one NUMA node. */
  nvlink: z.boolean().default(true),
  labels: z.record(z.string(), z.string()).default({}),
  taints: z
    .array(
      z.object({
        key: z.string().min(1),
        value: z.string().optional(),
        effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']),
      }),
    )
    .default([]),
  cpu: z.string().default('64'),
  memory: z.string().default('512Gi'),
  /**
   * Cards in MIG mode and the whole instances each node of the group starts with (static MIG, as
   * `nvidia-smi mig -cgi … -C` makes them): each a profile name, created in list order at its first
   * free legal placement, or `profile@start` at that placement. The fake driver has MIG on H100
   * 80GB (76000–86000 MiB) and H200 141GB (130000–150000 MiB) cards only. A `dynamic` card is
   * kept for dynamic MIG (the node agent's `mig.dynamicCards`): it starts in MIG mode with no
   * instance, and the agent makes and destroys its instances for the placements the control plane
   * grants (in MIG mode from the start, since the simulated agent cannot list a card's processes and
   * so never switches a card into MIG mode itself).
   */
  mig: z
    .array(
      z.object({
        card: z.number().int().min(0).max(15),
        instances: z
          .array(z.string().regex(MIG_INSTANCE_PATTERN, 'a MIG profile such as 3g.40gb, or 3g.40gb@4 to place it'))
          .max(7)
          .default([]),
        /** Serve the card's instances as vcuda-core/vcuda-memory shares (the node agent's `mig.shared`), not whole. */
        shared: z.boolean().default(false),
        /** Keep the card for dynamic MIG (the node agent's `mig.dynamicCards`): no `instances` of its own. */
        dynamic: z.boolean().default(false),
      }),
    )
    .default([]),
});

export const clusterSpecSchema = z.object({
  name: z.string().min(1).default('sim'),
  memoryUnitMiB: z.number().int().positive().default(1),
  nodes: z.array(nodeGroupSchema).min(1),
  /** Namespace quotas: core in hundredths of a card, memory in MiB. */
  quotas: z
    .record(z.string(), z.object({ core: z.number().int().min(0), memoryMiB: z.number().int().min(0) }))
    .default({}),
});

export type ClusterSpec = z.infer<typeof clusterSpecSchema>;
export type NodeGroup = z.infer<typeof nodeGroupSchema>;

/** The default demo cluster: 4 nodes × 8 fake 80 GiB cards. */
export const DEFAULT_CLUSTER: ClusterSpec = clusterSpecSchema.parse({ nodes: [{ count: 4, cards: 8 }] });

export function parseClusterSpec(doc: unknown, source = 'cluster'): ClusterSpec {
  const parsed = clusterSpecSchema.safeParse(doc);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), source);
  const migErrors = parsed.data.nodes.flatMap((g, i) => migProblems(g, `nodes[${i}].mig`));
  if (migErrors.length > 0) throw new ValidationError(migErrors, source);
  const names = expandNodes(parsed.data).map((n) => n.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup)
    throw new ValidationError(
      [{ path: 'nodes', rule: 'unique-names', message: `nodes: node name "${dup}" appears twice` }],
      source,
    );
  return parsed.data;
}

/** Each MIG card of a group must be one of its cards, named once. */
function migProblems(g: NodeGroup, path: string): FieldError[] {
  const seen = new Set<number>();
  return g.mig.flatMap((m, j) => {
    const where = `${path}[${j}].card`;
    if (m.card >= g.cards)
      return [fieldError(where, 'mig-card', `card ${m.card} is not one of the group's ${g.cards} cards`)];
    if (seen.has(m.card)) return [fieldError(where, 'mig-card', `card ${m.card} is listed twice`)];
    seen.add(m.card);
    if (m.dynamic && (m.instances.length > 0 || m.shared)) {
      const detail = `card ${m.card} is kept for dynamic MIG: the node agent makes its instances, so it has no instances or shared`;
      return [fieldError(`${path}[${j}].dynamic`, 'mig-dynamic-empty', detail)];
    }
    return [];
  });
}

/** A static MIG instance of the description: its profile, and its placement's start when given. */
export function parseMigInstance(text: string): { profile: string; start?: number } {
  const [profile = '', at] = text.split('@');
  return at === undefined ? { profile } : { profile, start: Number(at) };
}

export async function loadClusterSpec(path: string): Promise<ClusterSpec> {
  return parseClusterSpec(parseManifestText(await readFile(path, 'utf8'), path), path);
}

export type SimNode = { name: string; group: NodeGroup; cards: CardInventory[]; links: CardLink[][] };

/**
 * A node's seed for the fake driver (`FAKEGPU_UUID_SEED`): one per node, so card UUIDs differ
 * across the cluster (the ledger tells cards apart by UUID) while the driver describes the node.
 */
export function nodeSeedOf(node: string): number {
  return createHash('sha256').update(node).digest().readUInt32BE(0);
}

/** The UUID the fake driver reports for card `index` under `seed` (native/fake/fake_env.c). */
export function fakeCardUuid(seed: number, index: number): string {
  const tail = seed.toString(16).padStart(8, '0') + index.toString(16).padStart(4, '0');
  return `GPU-fa4e6770-0000-4000-8000-${tail}`;
}

/** The PCI bus id the fake driver's NVML reports for card `index` (native/fake/fake_nvml.c). */
export function fakeCardPciBusId(index: number): string {
  return `00000000:${(0x19 + 0x0c * index).toString(16).toUpperCase().padStart(2, '0')}:00.0`;
}

export function expandNodes(spec: ClusterSpec): SimNode[] {
  const out: SimNode[] = [];
  for (const g of spec.nodes) {
    for (let i = 0; i < g.count; i++) {
      const name = g.count === 1 && g.name ? g.name : `${g.name ?? g.namePrefix}-${i}`;
      const seed = nodeSeedOf(name);
      const perNuma = Math.max(1, Math.ceil(g.cards / g.numaNodes));
      const cards: CardInventory[] = Array.from({ length: g.cards }, (_, c) => ({
        uuid: fakeCardUuid(seed, c),
        index: c,
        model: g.model,
        memoryMiB: g.memoryMiB,
        numaNode: Math.floor(c / perNuma),
        pciBusId: fakeCardPciBusId(c),
        healthy: true,
      }));
      const links = cards.map((a) =>
        cards.map((b): CardLink => {
          if (a.index === b.index) return { nvlinks: 0, pcie: 'internal' };
          const sameNuma = a.numaNode === b.numaNode;
          return { nvlinks: sameNuma && g.nvlink ? 12 : 0, pcie: sameNuma ? 'node' : 'system' };
        }),
      );
      out.push({ name, group: g, cards, links });
    }
  }
  return out;
}

/** The inventory a node agent would publish for this simulated node. */
export function inventoryOf(node: SimNode, memoryUnitMiB: number, now: Date): NodeInventory {
  return {
    version: 1,
    node: node.name,
    memoryUnitMiB,
    cards: node.cards,
    links: node.links,
    heartbeat: now.toISOString(),
  };
}
