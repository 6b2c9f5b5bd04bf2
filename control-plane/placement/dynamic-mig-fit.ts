/**
 * Whole MIG instances made on demand for one container (dynamic MIG), pure over a node's dynamic-MIG
 * cards: each instance is a placement the planner picks (mig-planner.ts) on a healthy card that
 * passes the pod's card filters, granted by its placement key; the node agent creates it when the
 * container starts. Placements this pod already took in the attempt count as taken, and the pod's
 * other asks are the planner's pending requests, so its first container does not strand its second.
 */
import { type ContainerGpuRequest, migPlacementKey } from '../../contract/index.js';
import type { DynamicMigCardSnapshot } from './dynamic-mig-cards.js';
import type { MigPlan } from './mig-fit.js';
import { type MigSpan, planMigPlacement } from './mig-planner.js';
import type { CardConstraints } from './placement-request.js';
import type { Refusal } from './refusals.js';

/** Spans this pod's earlier containers took in the attempt, per card UUID. */
export type DynamicMigTaken = Map<string, MigSpan[]>;

function passesFilters(card: DynamicMigCardSnapshot, c: CardConstraints): boolean {
  const model = card.model.toLowerCase();
  if (c.modelInclude.length > 0 && !c.modelInclude.some((m) => model.includes(m))) return false;
  if (c.modelExclude.some((m) => model.includes(m))) return false;
  if (c.uuidInclude.length > 0 && !c.uuidInclude.includes(card.uuid)) return false;
  return !c.uuidExclude.includes(card.uuid);
}

/** Plans the container's instances on the dynamic-MIG cards, or says why they cannot be made here. */
export function placeDynamicMigContainer(
  cards: readonly DynamicMigCardSnapshot[],
  req: ContainerGpuRequest,
  constraints: CardConstraints,
  taken: DynamicMigTaken,
  pending: readonly string[],
): MigPlan[] | Refusal {
  const profile = req.mig as string;
  const usable = cards.filter((c) => c.healthy && passesFilters(c, constraints));
  if (usable.length === 0) {
    const why = cards.find((c) => c.healthReason)?.healthReason;
    return {
      reason: 'no-matching-card',
      message: `no healthy dynamic-MIG card here passes the pod's card filters${why ? ` (${why})` : ''}`,
    };
  }
  const plans: MigPlan[] = [];
  for (let n = 0; n < req.cards; n++) {
    const view = usable.map((c) => ({ ...c, taken: [...c.taken, ...(taken.get(c.uuid) ?? [])] }));
    const more = Array.from({ length: req.cards - n - 1 }, () => profile);
    const r = planMigPlacement(view, profile, [...more, ...pending]);
    if (!r.ok) return { reason: 'insufficient-mig-instances', message: r.message };
    const { plan } = r;
    const card = view.find((c) => c.uuid === plan.cardUuid);
    const shape = card?.profiles.find((p) => p.profile === profile);
    taken.set(plan.cardUuid, [
      ...(taken.get(plan.cardUuid) ?? []),
      { profile, start: plan.start, size: plan.size, computeSlices: plan.computeSlices },
    ]);
    // The grant takes all of each slice's memory as the ledger registers it, so no second holder fits.
    const mig = {
      ...{ parent: plan.cardUuid, profile, start: plan.start, size: plan.size, dynamic: true as const },
      ...(card ? { sliceMemoryMiB: card.sliceMemoryMiB } : {}),
    };
    plans.push({ uuid: migPlacementKey(mig), core: 100, memoryMiB: shape?.memoryMiB ?? 0, mig });
  }
  return plans;
}
