/**
 * What placement needs from a pod: its normalized GPU request (contract), the card filters and
 * placement preferences from its annotations, and its per-container core amounts for the allocation tie rule.
 */
import {
  type ContainerGpuRequest,
  type PodLike,
  type QuantityPolicy,
  readPodGpuRequest,
} from '../../contract/index.js';
import { coreAmountsOf } from './holds/index.js';

export const placementPolicies = ['binpack', 'spread'] as const;
export type PlacementPolicy = (typeof placementPolicies)[number];

export type CardConstraints = Readonly<{
  /** Card model must contain one of these (case-insensitive); empty = any. */
  modelInclude: readonly string[];
  modelExclude: readonly string[];
  uuidInclude: readonly string[];
  uuidExclude: readonly string[];
  singleNuma: boolean;
}>;

export type PlacementRequest = Readonly<{
  podUid: string;
  /** `namespace/name`, for messages. */
  pod: string;
  containers: readonly ContainerGpuRequest[];
  /** Distinct per-container core amounts, ascending: what the device plugin's Allocate calls will see. */
  coreAmounts: readonly number[];
  policy: PlacementPolicy;
  constraints: CardConstraints;
}>;

function readList(value: string | undefined): string[] {
  if (!value) return [];
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Reads a pod into a placement request; throws ValidationError (contract) when its GPU request is invalid. */
export function readPlacementRequest(
  pod: PodLike,
  policy: QuantityPolicy,
  defaultPolicy: PlacementPolicy,
): PlacementRequest {
  const request = readPodGpuRequest(pod, policy);
  const a = pod.metadata?.annotations ?? {};
  const names = policy.names;
  const asked = a[names.placement]?.trim().toLowerCase();
  return {
    podUid: pod.metadata?.uid ?? '',
    pod: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
    containers: request.containers,
    coreAmounts: coreAmountsOf(request.containers.map((c) => c.corePerCard * c.cards)),
    policy: asked === 'binpack' || asked === 'spread' ? asked : defaultPolicy,
    constraints: {
      modelInclude: readList(a[names.gpuModelInclude]).map((s) => s.toLowerCase()),
      modelExclude: readList(a[names.gpuModelExclude]).map((s) => s.toLowerCase()),
      uuidInclude: readList(a[names.gpuUuidInclude]),
      uuidExclude: readList(a[names.gpuUuidExclude]),
      singleNuma: a[names.singleNuma]?.trim().toLowerCase() === 'true',
    },
  };
}
