/**
 * The node's inventory, published on its Node object (`vcuda.io/inventory` + `vcuda.io/heartbeat`).
 * `buildInventory` is pure; `InventoryPublisher` patches only when the content changed or the
 * heartbeat is due, so a quiet node costs one patch per heartbeat period.
 */
import { type CardLink, type NodeInventory, nodeInventorySchema, vcudaAnnotations } from '../contract/index.js';
import type { CardMig, GpuLink } from './nvml/gpu-source.js';

export type InventoryCard = {
  uuid: string;
  index: number;
  model: string;
  memoryTotalBytes: number;
  numaNode: number | null;
  pciBusId: string;
  healthy: boolean;
  healthReason?: string;
  concurrentManagedAccess?: boolean;
  /** MIG mode when the agent started (absent: no MIG). */
  migMode?: boolean;
  /** Kept for dynamic MIG: its inventory says `mig.dynamic`. */
  migDynamic?: boolean;
  /** The MIG layout read for this publication (absent: no MIG). */
  mig?: CardMig & { dynamic?: boolean };
  /** `MIG-` UUIDs of its instances served as shares (the agent's `mig.shared`), not whole. */
  sharedMigInstances?: readonly string[];
};

/**
 * A card's MIG layout for the inventory, read through `read`. A card that was in MIG mode at start
 * stays `enabled` when the read fails or says otherwise: its devices were never offered whole, so
 * the extender must not offer it whole either (a mode switch needs the agent restarted). A card
 * kept for dynamic MIG says `dynamic` in either mode (the agent switches it into MIG mode with its
 * first instance); when its layout cannot be read it offers no profile.
 */
export function migForInventory(
  card: Pick<InventoryCard, 'migMode' | 'migDynamic'>,
  read: () => CardMig | null,
  onError: (err: unknown) => void,
): InventoryCard['mig'] {
  let mig: CardMig | null = null;
  try {
    mig = read();
  } catch (err) {
    onError(err);
  }
  if (card.migDynamic) return { ...(mig ?? { mode: 'enabled', profiles: [], instances: [] }), dynamic: true };
  if (card.migMode && mig?.mode !== 'enabled') return { mode: 'enabled', profiles: [], instances: [] };
  return mig ?? undefined;
}

function migWithShared<M extends CardMig>(mig: M, shared: readonly string[]): M {
  if (shared.length === 0) return mig;
  return { ...mig, instances: mig.instances.map((i) => (shared.includes(i.uuid) ? { ...i, shared: true } : i)) };
}

export function buildInventory(input: {
  nodeName: string;
  memoryUnitMiB: number;
  cards: readonly InventoryCard[];
  link: (a: number, b: number) => GpuLink;
  now: Date;
}): NodeInventory {
  const cards = [...input.cards].sort((a, b) => a.index - b.index);
  const links: CardLink[][] = cards.map((a) =>
    cards.map((b) => (a.index === b.index ? { nvlinks: 0, pcie: 'internal' } : input.link(a.index, b.index))),
  );
  return nodeInventorySchema.parse({
    version: 1,
    node: input.nodeName,
    memoryUnitMiB: input.memoryUnitMiB,
    cards: cards.map((c) => ({
      uuid: c.uuid,
      index: c.index,
      model: c.model,
      memoryMiB: Math.floor(c.memoryTotalBytes / (1024 * 1024)),
      numaNode: c.numaNode,
      pciBusId: c.pciBusId,
      healthy: c.healthy,
      ...(c.healthReason ? { healthReason: c.healthReason } : {}),
      ...(c.concurrentManagedAccess === undefined ? {} : { memoryBurst: c.concurrentManagedAccess }),
      ...(c.mig ? { mig: migWithShared(c.mig, c.sharedMigInstances ?? []) } : {}),
    })),
    links,
    heartbeat: input.now.toISOString(),
  });
}

/** Declared here, implemented over the Kubernetes API in kube-adapters.ts. */
export interface NodePatcher {
  patchNodeAnnotations(nodeName: string, annotations: Record<string, string>): Promise<void>;
}

/** The inventory without its heartbeat: what "changed" means. */
function contentKey(inv: NodeInventory): string {
  const { heartbeat: _heartbeat, ...rest } = inv;
  return JSON.stringify(rest);
}

export class InventoryPublisher {
  private lastKey: string | undefined;
  private lastPatchMs = Number.NEGATIVE_INFINITY;
  patches = 0;

  constructor(
    private readonly patcher: NodePatcher,
    private readonly heartbeatPeriodMs: number,
  ) {}

  /** True when the inventory should be (re)published at `nowMs` (pure decision). */
  isDue(inv: NodeInventory, nowMs: number): boolean {
    return contentKey(inv) !== this.lastKey || nowMs - this.lastPatchMs >= this.heartbeatPeriodMs;
  }

  /** Patches when due; returns whether it patched. A failed patch is retried on the next call. */
  async publish(inv: NodeInventory, nowMs: number): Promise<boolean> {
    if (!this.isDue(inv, nowMs)) return false;
    await this.patcher.patchNodeAnnotations(inv.node, {
      [vcudaAnnotations.inventory]: JSON.stringify(inv),
      [vcudaAnnotations.heartbeat]: inv.heartbeat,
    });
    this.lastKey = contentKey(inv);
    this.lastPatchMs = nowMs;
    this.patches++;
    return true;
  }
}
