/**
 * Dynamic MIG on the node: the GPU instance and compute instance a signed grant's placement
 * (card, profile, start) needs, created when its pod's container starts and destroyed when the
 * last pod holding it ends.
 *
 * Idempotent by placement: a GPU instance of the profile already at the start is adopted, never
 * duplicated, and so is its compute instance; NVML answers INSUFFICIENT_RESOURCES (not "exists")
 * for a taken placement, so the agent looks before it creates. Crash safety: the intent goes to
 * the checkpoint (durably) before each step that changes the card, so every GPU instance the
 * agent ever created is named there first. After a restart `reconcile` finishes what was being
 * destroyed and rolls back what no live holder needs; what a live holder needs is resumed by its
 * next `ensure` (the kubelet calls PreStartContainer again for a container that failed to start).
 * When the compute instance cannot be made the GPU instance is destroyed again (rollback) before
 * the error goes up, so a failed second step never leaves a half instance behind (NVIDIA's DRA
 * driver #1452). A card is switched into MIG mode only when it holds nothing.
 */
import { VcudaError } from '../../contract/index.js';
import type { GpuInstanceState, MigControl } from '../nvml/gpu-source.js';
import { type MigIntent, MigIntentCheckpoint, type MigPlacement, placementKey } from './dynamic-mig-checkpoint.js';

/** A GPU instance as NVML lists it, with its compute instances. */
/** What else it reads about a card: its MIG mode, whether anything holds it, a MIG device's UUID. */
export interface MigCardView {
  migMode(card: number): boolean | undefined;
  /** Whether nothing runs on or is granted the card (whole, shares or instances). */
  isCardIdle(card: number): boolean;
  deviceUuid(card: number, gpuInstanceId: number, computeInstanceId: number): string | undefined;
}

/** The points between two steps where a crash can land; `faults` is called at each (tests kill there). */
export const dynamicMigSteps = [
  'before-intent',
  'after-intent',
  'after-gi-create',
  'after-gi-checkpoint',
  'after-ci-create',
  'after-ready-checkpoint',
  'after-destroy-intent',
  'after-ci-destroy',
  'after-gi-destroy',
] as const;
export type DynamicMigStep = (typeof dynamicMigSteps)[number];

export type DynamicMigDeps = {
  control: MigControl;
  cards: MigCardView;
  checkpointPath: string;
  /** Called at every step boundary; absent in production. */
  faults?: (step: DynamicMigStep, key: string) => void;
};

export type ReadyMigInstance = Readonly<{ uuid: string; gpuInstanceId: number; computeInstanceId: number }>;

export class DynamicMigError extends VcudaError<'mig-not-idle' | 'mig-create-failed' | 'mig-unavailable'> {}

export class DynamicMig {
  private readonly checkpoint: MigIntentCheckpoint;
  private readonly faults: (step: DynamicMigStep, key: string) => void;

  constructor(private readonly deps: DynamicMigDeps) {
    this.checkpoint = MigIntentCheckpoint.open(deps.checkpointPath);
    this.faults = deps.faults ?? (() => {});
  }

  /** The intents on record (what the agent created or is creating). */
  intents(): MigIntent[] {
    return this.checkpoint.list();
  }

  /** Creates (or adopts) the instance at `p` for `holder`; returns its MIG device. */
  ensure(p: MigPlacement, holder: string): ReadyMigInstance {
    const key = placementKey(p);
    const known = this.checkpoint.get(key);
    const holders = [...new Set([...(known?.holders ?? []), holder])];
    const gi = this.gpuInstanceAt(p);
    const ready = known?.phase === 'ready' && gi && this.readyOf(p, gi);
    if (ready) {
      if (!known.holders.includes(holder)) this.checkpoint.put({ ...known, holders });
      return ready;
    }
    this.faults('before-intent', key);
    this.checkpoint.put({ ...p, phase: 'creating', holders });
    this.faults('after-intent', key);
    this.enterMigMode(p.cardIndex);
    let gpuInstanceId = gi?.gpuInstanceId;
    if (gpuInstanceId === undefined) {
      gpuInstanceId = this.deps.control.createGpuInstance(p.cardIndex, p.profileId, p.start, p.size);
      this.faults('after-gi-create', key);
    }
    this.checkpoint.put({ ...p, phase: 'creating', gpuInstanceId, holders });
    this.faults('after-gi-checkpoint', key);
    let computeInstanceId = this.gpuInstanceAt(p)?.computeInstanceIds[0];
    if (computeInstanceId === undefined) {
      try {
        computeInstanceId = this.deps.control.createComputeInstance(p.cardIndex, gpuInstanceId);
      } catch (cause) {
        this.deps.control.destroyGpuInstance(p.cardIndex, gpuInstanceId);
        this.checkpoint.remove(key);
        throw new DynamicMigError(
          'mig-create-failed',
          `MIG ${key}: compute instance not created; GPU instance rolled back`,
          {
            cause,
          },
        );
      }
      this.faults('after-ci-create', key);
    }
    const uuid = this.deps.cards.deviceUuid(p.cardIndex, gpuInstanceId, computeInstanceId);
    if (!uuid) throw new DynamicMigError('mig-unavailable', `MIG ${key}: no MIG device for GI ${gpuInstanceId}`);
    this.checkpoint.put({ ...p, phase: 'ready', gpuInstanceId, computeInstanceId, uuid, holders });
    this.faults('after-ready-checkpoint', key);
    return { uuid, gpuInstanceId, computeInstanceId };
  }

  /** `holder` no longer needs the placement; the instance goes when nobody does. */
  release(key: string, holder: string): void {
    const known = this.checkpoint.get(key);
    if (!known) return;
    const holders = known.holders.filter((h) => h !== holder);
    if (holders.length > 0) {
      this.checkpoint.put({ ...known, holders });
      return;
    }
    this.destroy({ ...known, holders });
  }

  /**
   * After a restart and on every housekeeping tick: drops holders that are gone and destroys what
   * the agent created that no live holder needs (creating ones included: their pod went away).
   */
  reconcile(isLiveHolder: (holder: string) => boolean): void {
    for (const intent of this.checkpoint.list()) {
      const holders = intent.holders.filter(isLiveHolder);
      if (intent.phase !== 'destroying' && holders.length > 0) {
        if (holders.length !== intent.holders.length) this.checkpoint.put({ ...intent, holders });
        continue;
      }
      this.destroy({ ...intent, holders: [] });
    }
  }

  private destroy(intent: MigIntent): void {
    const key = placementKey(intent);
    this.checkpoint.put({ ...intent, phase: 'destroying' });
    this.faults('after-destroy-intent', key);
    const gi = this.gpuInstanceAt(intent);
    if (gi) {
      for (const ci of gi.computeInstanceIds)
        this.deps.control.destroyComputeInstance(intent.cardIndex, gi.gpuInstanceId, ci);
      this.faults('after-ci-destroy', key);
      this.deps.control.destroyGpuInstance(intent.cardIndex, gi.gpuInstanceId);
      this.faults('after-gi-destroy', key);
    }
    this.checkpoint.remove(key);
  }

  /** The GPU instance of the placement's profile at its start, if one exists. */
  private gpuInstanceAt(p: MigPlacement): GpuInstanceState | undefined {
    if (this.deps.cards.migMode(p.cardIndex) !== true) return undefined;
    return this.deps.control
      .gpuInstances(p.cardIndex)
      .find((g) => g.profileId === p.profileId && g.start === p.start && g.size === p.size);
  }

  private readyOf(p: MigPlacement, gi: GpuInstanceState): ReadyMigInstance | undefined {
    const computeInstanceId = gi.computeInstanceIds[0];
    if (computeInstanceId === undefined) return undefined;
    const uuid = this.deps.cards.deviceUuid(p.cardIndex, gi.gpuInstanceId, computeInstanceId);
    return uuid ? { uuid, gpuInstanceId: gi.gpuInstanceId, computeInstanceId } : undefined;
  }

  private enterMigMode(card: number): void {
    const mode = this.deps.cards.migMode(card);
    if (mode === true) return;
    if (mode === undefined) throw new DynamicMigError('mig-unavailable', `card ${card} has no MIG`);
    if (!this.deps.cards.isCardIdle(card)) {
      throw new DynamicMigError('mig-not-idle', `card ${card} is not in MIG mode and holds work: not switched`);
    }
    this.deps.control.setMigMode(card, true);
  }
}
