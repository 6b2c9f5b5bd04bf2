/**
 * A claim's MIG partitions as the instances to hand over (pure). kube-scheduler allocates a
 * partition whole (no shareID, no consumedCapacity); Prepare hands the container the instance that
 * sits at the partition's placement: its `MIG-` UUID, its parent's `/dev/nvidiaN` and the GPU- and
 * compute-instance access nodes (`/dev/nvidia-caps/nvidia-cap<N>`), as device-plugin mode does
 * (node-agent/mig/). Whole instances are never capped: no limit file, no libvcuda.
 *
 * Every doubt refuses the claim: a result that names another pool, a partition this node does not
 * offer, a sick parent, a share of a partition (forged), admin access, or a partition without an
 * instance. Creating the instance at Prepare (dynamic MIG) is not done here yet: the node agent
 * offers instance-less partitions only when `migCreatable` is set (resource-slice.ts), and a
 * creator would plug in where `noInstance` refuses.
 */
import type { DraAllocationResult } from '../../contract/index.js';
import type { MigDeviceRef } from '../allocation/ports.js';
import type { DraClaimRef } from '../kubelet/dra-protocol.js';
import { ClaimRefused } from './claim-shares.js';

/** A MIG partition of this node's slices: its card, profile and placement, and the instance there. */
export type MigPoolDevice = {
  name: string;
  profile: string;
  start: number;
  parent: { uuid: string; index: number; minorNumber: number; healthy: boolean; healthReason?: string };
  instance?: MigDeviceRef;
};

/** One instance handed over for a result. */
export type MigHandoverItem = {
  request: string;
  device: string;
  uuid: string;
  profile: string;
  parentUuid: string;
  parentMinor: number;
  capMinors: number[];
};

export type MigContext = { pool: string; devices: ReadonlyMap<string, MigPoolDevice> };

function noInstance(ref: DraClaimRef, what: string, d: MigPoolDevice): never {
  throw new ClaimRefused(
    ref,
    `${what}: no MIG ${d.profile} instance sits at memory slice ${d.start} of card ${d.parent.uuid}, and this node agent does not create instances at Prepare`,
  );
}

/** The instances for the claim's MIG results (`mine`: its results of this driver, all of partitions). */
export function migInstancesOfClaim(
  ref: DraClaimRef,
  mine: readonly DraAllocationResult[],
  ctx: MigContext,
): MigHandoverItem[] {
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
    const instance = d.instance;
    if (!instance) return noInstance(ref, what, d);
    if (!instance.capMinors) {
      throw new ClaimRefused(
        ref,
        `${what}: the driver lists no access nodes for MIG instance ${instance.uuid} (gpu${d.parent.minorNumber}/gi${instance.gpuInstanceId}/ci${instance.computeInstanceId})`,
      );
    }
    return {
      request: r.request,
      device: r.device,
      uuid: instance.uuid,
      profile: d.profile,
      parentUuid: d.parent.uuid,
      parentMinor: d.parent.minorNumber,
      capMinors: [...instance.capMinors],
    };
  });
}
