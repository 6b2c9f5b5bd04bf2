/**
 * The messages of the kubelet's device plugin v1beta1 and PodResources v1 APIs, as plain types
 * (field names exactly as the protos spell them). A leaf: the allocator, the plugins and the
 * container files all speak these, and it imports nothing, so none of them depends on another
 * through it. `grpc-services.ts` loads the services that carry them.
 */

export const DEVICE_PLUGIN_VERSION = 'v1beta1';
export const KUBELET_SOCKET = 'kubelet.sock';
export const HEALTHY = 'Healthy';
export const UNHEALTHY = 'Unhealthy';

export type DevicePluginOptions = { pre_start_required: boolean; get_preferred_allocation_available: boolean };
export type RegisterRequest = {
  version: string;
  endpoint: string;
  resource_name: string;
  options: DevicePluginOptions;
};
export type NumaNode = { ID: number };
export type Device = { ID: string; health: string; topology?: { nodes: NumaNode[] } | null };
export type ListAndWatchResponse = { devices: Device[] };
export type ContainerPreferredAllocationRequest = {
  available_deviceIDs: string[];
  must_include_deviceIDs: string[];
  allocation_size: number;
};
export type PreferredAllocationRequest = { container_requests: ContainerPreferredAllocationRequest[] };
export type PreferredAllocationResponse = { container_responses: { deviceIDs: string[] }[] };
export type AllocateRequest = { container_requests: { devices_ids: string[] }[] };
export type Mount = { container_path: string; host_path: string; read_only: boolean };
export type DeviceSpec = { container_path: string; host_path: string; permissions: string };
export type ContainerAllocateResponse = {
  envs: Record<string, string>;
  mounts: Mount[];
  devices: DeviceSpec[];
  annotations: Record<string, string>;
  cdi_devices: { name: string }[];
};
export type AllocateResponse = { container_responses: ContainerAllocateResponse[] };
export type PreStartContainerRequest = { devices_ids: string[] };

export type ContainerDevices = { resource_name: string; device_ids: string[]; topology?: { nodes: NumaNode[] } | null };
export type ContainerResources = { name: string; devices: ContainerDevices[] };
export type PodResources = { name: string; namespace: string; containers: ContainerResources[] };
export type ListPodResourcesResponse = { pod_resources: PodResources[] };
