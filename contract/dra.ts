/**
 * vcuda as a DRA driver (resource.k8s.io/v1): the names every side agrees on (the node agent that
 * publishes ResourceSlices and prepares claims, the simulator's allocator, the deploy overlay) beside
 * dra-parameters.ts, and the parts of a ResourceClaim's status the driver reads, validated with zod
 * because they come from the API server.
 */
import { z } from 'zod';

export const DRA_CORES_PER_CARD = 100;
/** Taint key the node agent puts on a card whose health failed (Xid, lost). */
export const DRA_UNHEALTHY_TAINT = 'gpu.vcuda.io/unhealthy';

/**
 * The ledger's holder id of a ResourceClaim's allocation (`claim:<uid>`): claims and pods share
 * the ledger's holder column, and a pod UID never contains a colon.
 */
export const DRA_CLAIM_HOLDER_PREFIX = 'claim:';
export const claimHolderId = (claimUid: string): string => `${DRA_CLAIM_HOLDER_PREFIX}${claimUid}`;
export const isClaimHolder = (holderId: string): boolean => holderId.startsWith(DRA_CLAIM_HOLDER_PREFIX);

/**
 * The ledger's container column for one allocated share of a claim (`<request>/<shareID>`, the
 * device where a result has no shareID): the charge writes it, the node agent reports usage under it.
 */
export const claimShareKey = (request: string, shareId: string | null | undefined, device: string): string =>
  `${request}/${shareId || device}`;

/** A card's device name in its slice: `gpu-<NVML index>` (a DNS label, as the API requires). */
export function draDeviceName(cardIndex: number): string {
  return `gpu-${cardIndex}`;
}

/**
 * A MIG partition's device name: `gpu-<card>-mig-<profile>-<first memory slice>`, the profile's
 * `.` and `+` turned into `-` (`gpu-0-mig-1g-10gb-me-3`), a DNS label as the API requires.
 */
export function draMigDeviceName(cardIndex: number, profile: string, start: number): string {
  return `gpu-${cardIndex}-mig-${profile.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${start}`;
}

/** Whether a device name is a MIG partition's (draMigDeviceName) rather than a card's. */
export function isDraMigDeviceName(device: string): boolean {
  return /^gpu-\d{1,4}-mig-[a-z0-9-]+-\d$/.test(device);
}

/**
 * The attribute every MIG partition has and no card has: the DeviceClasses tell the two apart by it
 * (`'profile' in device.attributes['gpu.vcuda.io']`), so a whole-card request never lands on a partition.
 */
export const DRA_MIG_PROFILE_ATTRIBUTE = 'profile';

/** The DeviceClass of MIG partitions beside the cards' class (named as the driver): `mig.<driver>`. */
export function draMigClassName(driver: string): string {
  return `mig.${driver}`;
}

/** The cards' DeviceClass selector: the driver's devices without a MIG profile. */
export function draCardSelector(driver: string): string {
  return `device.driver == '${driver}' && !('${DRA_MIG_PROFILE_ATTRIBUTE}' in device.attributes['${driver}'])`;
}

/** The MIG DeviceClass selector: the driver's MIG partitions. */
export function draMigSelector(driver: string): string {
  return `device.driver == '${driver}' && '${DRA_MIG_PROFILE_ATTRIBUTE}' in device.attributes['${driver}']`;
}

/** A request selector for one MIG profile (`3g.40gb`), as a claim writes it. */
export function draMigProfileSelector(driver: string, profile: string): string {
  return `device.attributes['${driver}'].${DRA_MIG_PROFILE_ATTRIBUTE} == '${profile}'`;
}

const quantityText = z.union([z.string().max(64), z.number()]).transform(String);

export const draAllocationResultSchema = z.object({
  request: z.string().max(253),
  driver: z.string().max(253),
  pool: z.string().max(253),
  device: z.string().max(253),
  adminAccess: z.boolean().nullish(),
  shareID: z.string().max(64).nullish(),
  consumedCapacity: z.record(z.string().max(64), quantityText).nullish(),
});

export const draDeviceConfigSchema = z.object({
  source: z.string().max(64).nullish(),
  requests: z.array(z.string().max(253)).max(64).nullish(),
  opaque: z.object({ driver: z.string().max(253), parameters: z.unknown() }).nullish(),
});

/** The parts of a resource.k8s.io/v1 ResourceClaim that Prepare reads. */
export const draClaimSchema = z.object({
  metadata: z.object({ name: z.string(), namespace: z.string(), uid: z.string() }),
  status: z
    .object({
      allocation: z
        .object({
          devices: z
            .object({
              results: z.array(draAllocationResultSchema).max(128).nullish(),
              config: z.array(draDeviceConfigSchema).max(128).nullish(),
            })
            .nullish(),
        })
        .nullish(),
      reservedFor: z
        .array(z.object({ resource: z.string(), name: z.string(), uid: z.string(), apiGroup: z.string().nullish() }))
        .max(256)
        .nullish(),
    })
    .nullish(),
});
export type DraClaim = z.infer<typeof draClaimSchema>;
export type DraAllocationResult = z.infer<typeof draAllocationResultSchema>;
