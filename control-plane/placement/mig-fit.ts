/**
 * Whole MIG instances for one container, pure over a node's instances: `count` instances of the
 * asked profile, each entirely free (nothing of another pod on it), on healthy cards that pass the
 * pod's card filters. An instance is granted whole, like a whole card (core 100 on its own scale);
 * the ledger charges it the part of its parent card it spans and all its memory (ledgerUseOfGrant).
 * Binpack fills the cards whose instances are already held first (keeping other cards whole for
 * later), spread the emptiest; ties go to the lower card index, then the lower placement.
 */
import type { ContainerGpuRequest } from '../../contract/index.js';
import type { MigInstanceSnapshot } from './cluster-snapshot.js';
import type { CardConstraints, PlacementPolicy } from './placement-request.js';
import type { Refusal } from './refusals.js';

/** One planned instance, as the grant and the ledger carry it. */
export type MigPlan = {
  uuid: string;
  core: 100;
  memoryMiB: number;
  /** `dynamic`: made on demand at this placement (dynamic-mig-fit.ts); `uuid` is the placement's key. */
  mig: { parent: string; profile: string; start: number; size: number; dynamic?: true; sliceMemoryMiB?: number };
};

/** Instances this pod already holds in the attempt, and which kind of container took each first. */
export type MigTaken = Map<string, 'app' | 'init'>;

function isFree(i: MigInstanceSnapshot): boolean {
  return i.usedCore <= 0 && i.usedMemoryMiB <= 0;
}

/** Whether an instance passes the pod's card filters, read on its parent card (model, UUID) or itself (UUID). */
function passesFilters(i: MigInstanceSnapshot, c: CardConstraints): boolean {
  const model = i.model.toLowerCase();
  if (c.modelInclude.length > 0 && !c.modelInclude.some((m) => model.includes(m))) return false;
  if (c.modelExclude.some((m) => model.includes(m))) return false;
  if (c.uuidInclude.length > 0 && !c.uuidInclude.includes(i.parentUuid) && !c.uuidInclude.includes(i.uuid)) {
    return false;
  }
  return !c.uuidExclude.includes(i.parentUuid) && !c.uuidExclude.includes(i.uuid);
}

function plural(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}

/** Why the node has no instance of the profile at all: which profiles it has, if any. */
function explainAbsent(instances: readonly MigInstanceSnapshot[], profile: string): Refusal {
  const present = [...new Set(instances.map((i) => i.profile))].sort();
  return {
    reason: 'no-matching-card',
    message:
      present.length === 0
        ? `no MIG ${profile} instance: no card here is in MIG mode with instances`
        : `no MIG ${profile} instance here (instances: ${present.join(', ')})`,
  };
}

/** Plans the container's instances, or says why the node cannot give them. */
export function placeMigContainer(
  instances: readonly MigInstanceSnapshot[],
  req: ContainerGpuRequest,
  policy: PlacementPolicy,
  constraints: CardConstraints,
  taken: MigTaken,
): MigPlan[] | Refusal {
  const profile = req.mig as string;
  const ofProfile = instances.filter((i) => i.profile === profile);
  if (ofProfile.length === 0) return explainAbsent(instances, profile);
  const healthy = ofProfile.filter((i) => i.healthy);
  if (healthy.length === 0) {
    const why = ofProfile.find((i) => i.healthReason)?.healthReason;
    return {
      reason: 'no-matching-card',
      message: `every MIG ${profile} instance here is on an unhealthy card${why ? ` (${why})` : ''}`,
    };
  }
  const eligible = healthy.filter((i) => passesFilters(i, constraints));
  if (eligible.length === 0) {
    return {
      reason: 'no-matching-card',
      message: `every MIG ${profile} instance here is excluded by the pod's card filters`,
    };
  }
  // Init containers run one at a time before the app containers: one may use an instance the pod holds.
  const usable = eligible.filter((i) => (isFree(i) && !taken.has(i.uuid)) || (req.isInit && taken.has(i.uuid)));
  if (usable.length < req.cards) {
    const free = eligible.filter((i) => isFree(i) && !taken.has(i.uuid)).length;
    return {
      reason: 'insufficient-mig-instances',
      message: `needs ${plural(req.cards, `free MIG ${profile} instance`)}; ${free} of ${eligible.length} free`,
    };
  }
  const heldOnCard = new Map<number, number>();
  for (const i of instances) {
    if (!isFree(i) || taken.has(i.uuid)) heldOnCard.set(i.parentIndex, (heldOnCard.get(i.parentIndex) ?? 0) + 1);
  }
  const order = (i: MigInstanceSnapshot) => {
    const reused = req.isInit && taken.has(i.uuid) ? 1 : 0;
    const held = heldOnCard.get(i.parentIndex) ?? 0;
    return [-reused, policy === 'binpack' ? -held : held, i.parentIndex, i.start];
  };
  const chosen = [...usable]
    .sort((a, b) => {
      const x = order(a);
      const y = order(b);
      for (let k = 0; k < x.length; k++) if (x[k] !== y[k]) return (x[k] as number) - (y[k] as number);
      return 0;
    })
    .slice(0, req.cards);
  for (const i of chosen) if (!taken.has(i.uuid)) taken.set(i.uuid, req.isInit ? 'init' : 'app');
  return chosen.map((i) => ({
    uuid: i.uuid,
    core: 100,
    memoryMiB: i.memoryMiB,
    mig: { parent: i.parentUuid, profile: i.profile, start: i.start, size: i.size },
  }));
}
