/**
 * The parts of `resource.k8s.io/v1` objects the simulated scheduler reads and writes
 * (ResourceSlice, DeviceClass, ResourceClaim), typed as they arrive in JSON.
 */

export type DeviceAttribute = { string?: string; int?: number; bool?: boolean; version?: string };

export type CapacityRequestPolicy = {
  default?: string;
  validRange?: { min?: string; max?: string; step?: string };
  validValues?: string[];
};

export type DeviceCapacity = { value: string; requestPolicy?: CapacityRequestPolicy };

export type SliceDevice = {
  name: string;
  attributes?: Record<string, DeviceAttribute>;
  capacity?: Record<string, DeviceCapacity>;
  allowMultipleAllocations?: boolean;
  consumesCounters?: { counterSet: string; counters?: Record<string, { value: string }> }[];
};

export type CounterSet = { name: string; counters?: Record<string, { value: string }> };

export type ResourceSlice = {
  metadata: { name: string };
  spec: {
    driver: string;
    pool: { name: string; generation: number; resourceSliceCount: number };
    nodeName?: string;
    allNodes?: boolean;
    devices?: SliceDevice[];
    sharedCounters?: CounterSet[];
  };
};

export type DeviceSelector = { cel?: { expression: string } };

export type DeviceClass = {
  metadata: { name: string };
  spec?: { selectors?: DeviceSelector[]; config?: { opaque?: unknown }[] };
};

export type ExactDeviceRequest = {
  deviceClassName: string;
  selectors?: DeviceSelector[];
  allocationMode?: 'ExactCount' | 'All';
  count?: number;
  adminAccess?: boolean;
  capacity?: { requests?: Record<string, string> };
};

export type DeviceRequest = { name: string; exactly?: ExactDeviceRequest; firstAvailable?: unknown[] };

export type DeviceConstraint = { requests?: string[]; matchAttribute?: string; distinctAttribute?: string };

export type ClaimSpec = {
  devices?: { requests?: DeviceRequest[]; constraints?: DeviceConstraint[]; config?: unknown[] };
};

export type AllocationResult = {
  request: string;
  driver: string;
  pool: string;
  device: string;
  shareID?: string;
  consumedCapacity?: Record<string, string>;
};

export type ClaimAllocation = {
  devices: { results: AllocationResult[]; config?: unknown[] };
  nodeSelector?: {
    nodeSelectorTerms: { matchFields?: { key: string; operator: string; values: string[] }[] }[];
  };
  allocationTimestamp?: string;
};

export type ConsumerReference = { resource: string; name: string; uid: string; apiGroup?: string };

export type ResourceClaim = {
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    finalizers?: string[];
    deletionTimestamp?: string;
    [k: string]: unknown;
  };
  spec: ClaimSpec;
  status?: { allocation?: ClaimAllocation; reservedFor?: ConsumerReference[]; [k: string]: unknown };
};

/** The finalizer kube-scheduler puts on a claim before it writes the allocation. */
export const CLAIM_FINALIZER = 'resource.kubernetes.io/delete-protection';
