/**
 * A claim's MIG partitions as the instances to hand over. kube-scheduler allocates a partition
 * whole (no shareID, no consumedCapacity); Prepare hands the container the instance that sits at
 * the partition's placement: its `MIG-` UUID, its parent's `/dev/nvidiaN` and the GPU- and
 * compute-instance access nodes (`/dev/nvidia-caps/nvidia-cap<N>`), as device-plugin mode does
 * (node-agent/mig/). Whole instances are never capped: no limit file, no libvcuda.
 *
 * Every doubt refuses the claim: a result that names another pool, a partition this node does not
 * offer, a sick parent, a share of a partition (forged), admin access, or a partition without an
 * instance where none can be made. With dynamic MIG a `MigInstanceMaker` creates the instance
 * (node-agent/mig/dynamic-mig.ts: idempotent, crash-safe) and holds it for the claim until Unprepare.
 */
import type { DraAllocationResult } from '../../contract/index.js';
import type { MigDeviceRef } from '../allocation/ports.js';
import type { DraClaimRef } from '../kubelet/dra-protocol.js';
import { ClaimRefused } from './claim-shares.js';

/** A MIG partition of this node's slices: its card, profile and placement, and the instance there. */
export type MigPoolDevice = {
  name: string;
  profile: string;
  profileId: number;
  start: number;
  size: number;
  parent: { uuid: string; index: number; minorNumber: number; healthy: boolean; healthReason?: string };
  instance?: MigDeviceRef;
};

/** One instance handed over for a result (checkpointed). */
export type MigHandoverItem = {
  request: string;
  device: string;
  uuid: string;
  profile: string;
  start: number;
  parentUuid: string;
  parentMinor: number;
  capMinors: number[];
};

/** Dynamic MIG as Prepare needs it; implemented over node-agent/mig/dynamic-mig.ts in dra-agent.ts. */
export interface MigInstanceMaker {
  /** Whether the instance at this partition is one the maker created (and so holds per claim). */
  made(d: MigPoolDevice): boolean;
  /** The instance at the partition for `holder`, created when absent; throws when it cannot be. */
  ensure(d: MigPoolDevice, holder: string): MigDeviceRef;
  /** `holder` is done with it; a made instance goes with its last holder, any other stays. */
  release(item: Pick<MigHandoverItem, 'parentUuid' | 'profile' | 'start'>, holder: string): void;
}

export type MigContext = { pool: string; devices: ReadonlyMap<string, MigPoolDevice> };

/** A result checked against this node's partitions: the partition it names. */
export type MigResult = { request: string; what: string; partition: MigPoolDevice };

/** The partitions the claim's MIG results (`mine`) name, each checked (pure); or ClaimRefused. */
export function migResultsOfClaim(
  ref: DraClaimRef,
  mine: readonly DraAllocationResult[],
  ctx: MigContext,
): MigResult[] {
  return mine.map((r, i) => {
    const what = `result ${i} (request ${r.request}, device ${r.pool}/${r.device})`;
    if (r.pool !== ctx.pool) throw new ClaimRefused(ref, `${what} names pool ${r.pool}, not this node's (${ctx.pool})`);
    const d = ctx.devices.get(r.device);
    if (!d) throw new ClaimRefused(ref, `${what} names a MIG partition that is not in this node's ResourceSlices`);
    if (!d.parent.healthy)
      throw new ClaimRefused(
        ref,
        `${what}: card ${d.parent.uuid} is unhealthy (${d.parent.healthReason ?? 'unknown'})`,
      );
    if (r.adminAccess) throw new ClaimRefused(ref, `${what} asks admin access, which vcuda does not serve`);
    if (r.shareID || r.consumedCapacity)
      throw new ClaimRefused(ref, `${what} is a share of a MIG partition, which is only allocated whole`);
    return { request: r.request, what, partition: d };
  });
}

/** What the container is handed for one result, from the instance at its partition (pure). */
export function handoverOf(ref: DraClaimRef, r: MigResult, instance: MigDeviceRef | undefined): MigHandoverItem {
  const d = r.partition;
  if (!instance) {
    throw new ClaimRefused(
      ref,
      `${r.what}: no MIG ${d.profile} instance sits at memory slice ${d.start} of card ${d.parent.uuid}, and the card is not kept for dynamic MIG (mig.dynamicCards)`,
    );
  }
  if (!instance.capMinors) {
    throw new ClaimRefused(
      ref,
      `${r.what}: the driver lists no access nodes for MIG instance ${instance.uuid} (gpu${d.parent.minorNumber}/gi${instance.gpuInstanceId}/ci${instance.computeInstanceId})`,
    );
  }
  return {
    request: r.request,
    device: d.name,
    uuid: instance.uuid,
    profile: d.profile,
    start: d.start,
    parentUuid: d.parent.uuid,
    parentMinor: d.parent.minorNumber,
    capMinors: [...instance.capMinors],
  };
}

/**
 * The instances for the claim's MIG results: the one that exists, or (dynamic MIG) the one the
 * maker creates or already holds for it, then held for `holder` too. What this call made is released
 * again when a later result fails, so a refused claim holds nothing.
 */
export function handOverInstances(
  ref: DraClaimRef,
  results: readonly MigResult[],
  maker: MigInstanceMaker | undefined,
): MigHandoverItem[] {
  const out: MigHandoverItem[] = [];
  try {
    for (const r of results) {
      const d = r.partition;
      const viaMaker = maker && (!d.instance || maker.made(d));
      out.push(handoverOf(ref, r, viaMaker ? maker.ensure(d, ref.uid) : d.instance));
    }
    return out;
  } catch (err) {
    for (const item of out) maker?.release(item, ref.uid);
    throw err;
  }
}
