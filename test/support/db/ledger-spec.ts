/**
 * The ledger's rules restated, pure, as the tests' independent specification: given the locked
 * card and quota rows and what a pod asks, which limits would it pass and by how much. Product
 * code never runs this: the ledger decides in SQL (card capacity in `vcuda_ledger_apply`, quota
 * refusals in `vcuda_quota_refusals`, db/migrations/0013), and db/ledger-functions.test.ts holds
 * that SQL to this statement over random states.
 */
import type { Violation } from '../../../db/ledger.js';

export type CardCapacity = {
  uuid: string;
  cluster: string;
  node: string;
  model: string;
  memoryMiB: number;
  isPresent: boolean;
  /** Hundredths of a whole GPU its 100 core stand for in quotas (migration 0020); absent: 100. */
  quotaWeight?: number;
  coreUsed: number;
  memoryUsedMiB: number;
};

export type QuotaCapacity = {
  name: string;
  scope: 'namespace' | 'team';
  cluster: string | null;
  namespace: string | null;
  team: string | null;
  /** '' = every model. */
  gpuModel: string;
  coreLimit: number;
  memoryLimitMiB: number;
  coreUsed: number;
  memoryUsedMiB: number;
};

/** `quotaCore`: what it costs quotas, each item's core weighted and rounded up; absent: `core`. */
export type CardDemand = { cardUuid: string; core: number; memoryMiB: number; quotaCore?: number };

export type { Violation };

/**
 * Sums what a pod's items ask of each card (two containers may share one card) and, given the
 * cards' quota weights, what each item costs quotas: its core scaled by its card's weight, rounded up.
 */
export function sumDemandByCard(
  items: readonly CardDemand[],
  weightOf?: (cardUuid: string) => number | undefined,
): CardDemand[] {
  const byCard = new Map<string, CardDemand>();
  for (const item of items) {
    const prev = byCard.get(item.cardUuid);
    const weight = weightOf?.(item.cardUuid) ?? 100;
    byCard.set(item.cardUuid, {
      cardUuid: item.cardUuid,
      core: (prev?.core ?? 0) + item.core,
      memoryMiB: (prev?.memoryMiB ?? 0) + item.memoryMiB,
      ...(weightOf ? { quotaCore: (prev?.quotaCore ?? 0) + Math.ceil((item.core * weight) / 100) } : {}),
    });
  }
  return [...byCard.values()].sort((a, b) => (a.cardUuid < b.cardUuid ? -1 : a.cardUuid > b.cardUuid ? 1 : 0));
}

/** Every card the pod asks for must exist on its node, be present and have room for the demand. */
export function checkCards(
  where: { cluster: string; node: string },
  cards: readonly CardCapacity[],
  demand: readonly CardDemand[],
): Violation[] {
  const byUuid = new Map(cards.map((c) => [c.uuid, c]));
  const out: Violation[] = [];
  for (const d of demand) {
    const card = byUuid.get(d.cardUuid);
    if (!card) {
      out.push({ code: 'not-found', message: `card ${d.cardUuid} is not known to the ledger` });
      continue;
    }
    if (card.cluster !== where.cluster || card.node !== where.node) {
      out.push({
        code: 'invalid',
        message: `card ${d.cardUuid} is on ${card.cluster}/${card.node}, not on ${where.cluster}/${where.node}`,
      });
      continue;
    }
    if (!card.isPresent) {
      out.push({ code: 'capacity-conflict', message: `card ${d.cardUuid} is no longer reported by ${card.node}` });
      continue;
    }
    const coreFree = 100 - card.coreUsed;
    if (d.core > coreFree) {
      out.push({
        code: 'capacity-conflict',
        message: `card ${d.cardUuid} has ${coreFree} core free, pod asks ${d.core} (over by ${d.core - coreFree})`,
      });
    }
    const memoryFreeMiB = card.memoryMiB - card.memoryUsedMiB;
    if (d.memoryMiB > memoryFreeMiB) {
      out.push({
        code: 'capacity-conflict',
        message: `card ${d.cardUuid} has ${memoryFreeMiB} MiB free, pod asks ${d.memoryMiB} MiB (over by ${d.memoryMiB - memoryFreeMiB} MiB)`,
      });
    }
  }
  return out;
}

export function describeQuota(
  q: Pick<QuotaCapacity, 'name' | 'scope' | 'cluster' | 'namespace' | 'team' | 'gpuModel'>,
): string {
  const subject = q.scope === 'team' ? `team ${q.team}` : `namespace ${q.cluster}/${q.namespace}`;
  return `quota ${q.name} (${subject}${q.gpuModel ? `, model ${q.gpuModel}` : ''})`;
}

/** What a pod adds to one quota: only the cards of the quota's model count when it names one. */
export function demandForQuota(
  quota: Pick<QuotaCapacity, 'gpuModel'>,
  demand: readonly CardDemand[],
  modelOf: (cardUuid: string) => string | undefined,
): { core: number; memoryMiB: number } {
  let core = 0;
  let memoryMiB = 0;
  for (const d of demand) {
    if (quota.gpuModel !== '' && modelOf(d.cardUuid) !== quota.gpuModel) continue;
    core += d.quotaCore ?? d.core;
    memoryMiB += d.memoryMiB;
  }
  return { core, memoryMiB };
}

/** Every applicable quota must have room for what the pod adds to it. */
export function checkQuotas(
  quotas: readonly QuotaCapacity[],
  demand: readonly CardDemand[],
  modelOf: (cardUuid: string) => string | undefined,
): Violation[] {
  const out: Violation[] = [];
  for (const q of quotas) {
    const add = demandForQuota(q, demand, modelOf);
    if (add.core === 0 && add.memoryMiB === 0) continue;
    if (q.coreUsed + add.core > q.coreLimit) {
      out.push({
        code: 'quota-exceeded',
        message: `${describeQuota(q)}: core limit ${q.coreLimit}, in use ${q.coreUsed}, pod asks ${add.core} (over by ${q.coreUsed + add.core - q.coreLimit})`,
      });
    }
    if (q.memoryUsedMiB + add.memoryMiB > q.memoryLimitMiB) {
      out.push({
        code: 'quota-exceeded',
        message: `${describeQuota(q)}: memory limit ${q.memoryLimitMiB} MiB, in use ${q.memoryUsedMiB} MiB, pod asks ${add.memoryMiB} MiB (over by ${q.memoryUsedMiB + add.memoryMiB - q.memoryLimitMiB} MiB)`,
      });
    }
  }
  return out;
}
