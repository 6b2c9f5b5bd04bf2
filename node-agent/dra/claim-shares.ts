/**
 * A claim's allocation as card shares, and the shares as limit-file records (pure). The scheduler
 * wrote the allocation, but the status may be forged or stale: every result of this driver must
 * name this node's pool and a healthy device of its slice, consume whole numbers within the
 * device's capacity, and (with what is already prepared on the card) not overcommit it. Anything
 * else refuses the whole claim with a message that says what is wrong.
 */
import {
  type ContainerGrant,
  type DeviceLimit,
  DRA_CAPACITY,
  DRA_CORES_PER_CARD,
  DRA_PARAMETERS_KIND,
  type DraAllocationResult,
  type DraClaim,
  formatFieldErrors,
  parseWholeQuantity,
  readGpuShareParameters,
  VcudaError,
} from '../../contract/index.js';
import { deviceLimitOf } from '../allocation/grant-limits.js';
import type { DraClaimRef } from '../kubelet/dra-protocol.js';

/** A claim refused at Prepare: its message goes back to the kubelet (and the pod's events). */
export class ClaimRefused extends VcudaError<'claim-refused'> {
  constructor(claim: DraClaimRef, reason: string) {
    super('claim-refused', `claim ${claim.namespace}/${claim.name} (${claim.uid}): ${reason}; refusing it`);
  }
}

/** A device of this node's slice, as Prepare checks a result against it. */
export type PoolDevice = {
  name: string;
  uuid: string;
  index: number;
  minorNumber: number;
  memoryBytes: number;
  healthy: boolean;
};

/** One allocation result of this driver: a share of one card. */
export type CardShare = {
  request: string;
  device: string;
  shareId: string;
  uuid: string;
  index: number;
  minorNumber: number;
  cores: number;
  memoryBytes: number;
  /** Soft limit from the claim's opaque config; equal to `cores` when none. */
  coreLimit: number;
};

export type ShareContext = {
  driver: string;
  pool: string;
  devices: ReadonlyMap<string, PoolDevice>;
  /** Cores and bytes other prepared claims hold on each device, by device name. */
  heldByOthers: ReadonlyMap<string, { cores: number; memoryBytes: number }>;
};

function consumed(
  ref: DraClaimRef,
  what: string,
  capacity: Record<string, string> | null | undefined,
  name: string,
  max: number,
) {
  const text = capacity?.[name];
  if (text === undefined) throw new ClaimRefused(ref, `${what} records no consumedCapacity.${name}`);
  const q = parseWholeQuantity(text);
  if (!q.ok || q.value < 1)
    throw new ClaimRefused(ref, `${what} consumedCapacity.${name} "${text}" is not a whole positive quantity`);
  if (q.value > max)
    throw new ClaimRefused(ref, `${what} consumedCapacity.${name} ${q.value} is more than the device has (${max})`);
  return q.value;
}

/** The soft limit each request gets from opaque configs of this driver (a later config wins). */
function coreLimitsOf(ref: DraClaimRef, claim: DraClaim, driver: string): (request: string) => number | undefined {
  const configs = claim.status?.allocation?.devices?.config ?? [];
  const parsed = configs.flatMap((c, i) => {
    if (!c.opaque || c.opaque.driver !== driver) return [];
    const read = readGpuShareParameters(
      c.opaque.parameters,
      `status.allocation.devices.config[${i}].opaque.parameters`,
    );
    if (!read.ok)
      throw new ClaimRefused(ref, `its ${DRA_PARAMETERS_KIND} is invalid: ${formatFieldErrors(read.errors)}`);
    return [{ requests: c.requests ?? [], config: read.parameters }];
  });
  return (request) => {
    let limit: number | undefined;
    for (const p of parsed) {
      const applies =
        p.requests.length === 0 || p.requests.includes(request) || p.requests.includes(request.split('/')[0] ?? '');
      if (applies && p.config.coreLimit !== undefined) limit = p.config.coreLimit;
    }
    return limit;
  };
}

/**
 * The results of this driver in the claim's allocation, after checking the API server's claim is the
 * one the kubelet named; or ClaimRefused.
 */
export function driverResults(ref: DraClaimRef, claim: DraClaim, driver: string): DraAllocationResult[] {
  const meta = claim.metadata;
  if (meta.uid !== ref.uid)
    throw new ClaimRefused(ref, `the API server has uid ${meta.uid} under that name (claim replaced?)`);
  if (meta.namespace !== ref.namespace || meta.name !== ref.name) {
    throw new ClaimRefused(ref, `the API server returned ${meta.namespace}/${meta.name}`);
  }
  const results = claim.status?.allocation?.devices?.results;
  if (!results) throw new ClaimRefused(ref, 'it is not allocated');
  const mine = results.filter((r) => r.driver === driver);
  if (mine.length === 0) throw new ClaimRefused(ref, `its allocation has no device of driver ${driver}`);
  return mine;
}

/** The claim's shares on this node (`mine`: its results of this driver, all of cards), or ClaimRefused. */
export function sharesOfClaim(
  ref: DraClaimRef,
  claim: DraClaim,
  mine: readonly DraAllocationResult[],
  ctx: ShareContext,
): CardShare[] {
  const limitOf = coreLimitsOf(ref, claim, ctx.driver);
  const used = new Map<string, { cores: number; memoryBytes: number }>();
  return mine.map((r, i) => {
    const what = `result ${i} (request ${r.request}, device ${r.pool}/${r.device})`;
    if (r.pool !== ctx.pool) throw new ClaimRefused(ref, `${what} names pool ${r.pool}, not this node's (${ctx.pool})`);
    const device = ctx.devices.get(r.device);
    if (!device) throw new ClaimRefused(ref, `${what} names a device that is not in this node's ResourceSlice`);
    if (!device.healthy) throw new ClaimRefused(ref, `${what}: card ${device.uuid} is unhealthy`);
    if (r.adminAccess) throw new ClaimRefused(ref, `${what} asks admin access, which ${ctx.driver} does not serve`);
    const cores = consumed(ref, what, r.consumedCapacity, DRA_CAPACITY.cores, DRA_CORES_PER_CARD);
    const memoryBytes = consumed(ref, what, r.consumedCapacity, DRA_CAPACITY.memory, device.memoryBytes);
    const sum = used.get(r.device) ?? { ...(ctx.heldByOthers.get(r.device) ?? { cores: 0, memoryBytes: 0 }) };
    sum.cores += cores;
    sum.memoryBytes += memoryBytes;
    used.set(r.device, sum);
    if (sum.cores > DRA_CORES_PER_CARD || sum.memoryBytes > device.memoryBytes) {
      throw new ClaimRefused(
        ref,
        `${what} would overcommit card ${device.uuid}: ${sum.cores} cores and ${sum.memoryBytes} bytes prepared of ${DRA_CORES_PER_CARD} and ${device.memoryBytes}`,
      );
    }
    const soft = limitOf(r.request);
    if (soft !== undefined && soft < cores)
      throw new ClaimRefused(ref, `${what}: its coreLimit ${soft} is below its ${cores} cores`);
    const { uuid, index, minorNumber } = device;
    return {
      request: r.request,
      device: r.device,
      shareId: r.shareID ?? '',
      uuid,
      index,
      minorNumber,
      cores,
      memoryBytes,
      coreLimit: soft ?? cores,
    };
  });
}

/**
 * Limit-file records for a claim's shares, one per card (shares of one card add up), through the
 * device-plugin path's own rule: a whole card (100 cores) is hard and unthrottled, a share is hard
 * at its cores unless a soft limit lets it burst.
 */
export function deviceLimitsOf(claimName: string, shares: readonly CardShare[]): DeviceLimit[] {
  const byCard = new Map<string, CardShare>();
  for (const s of shares) {
    const prev = byCard.get(s.uuid);
    byCard.set(
      s.uuid,
      prev
        ? {
            ...prev,
            cores: prev.cores + s.cores,
            memoryBytes: prev.memoryBytes + s.memoryBytes,
            coreLimit: Math.max(prev.coreLimit + s.cores, s.coreLimit),
          }
        : s,
    );
  }
  return [...byCard.values()].map((s) => {
    const cores = Math.min(s.cores, DRA_CORES_PER_CARD);
    const coreLimit = Math.min(Math.max(s.coreLimit, cores), DRA_CORES_PER_CARD);
    const card = { uuid: s.uuid, core: cores, memoryBytes: s.memoryBytes };
    const grant: ContainerGrant = {
      name: claimName,
      isInit: false,
      cards: [card],
      coreLimit,
      mode: coreLimit > cores ? 'soft' : 'hard',
    };
    return deviceLimitOf(card, grant, s.index);
  });
}
