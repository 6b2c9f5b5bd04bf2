/**
 * The kubelet's two gRPC APIs (device plugin v1beta1, PodResources v1), loaded from our .proto files
 * with field names kept exactly as the protos spell them (`ID`, `devices_ids`, `deviceIDs`).
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export const DEVICE_PLUGIN_VERSION = 'v1beta1';
export const KUBELET_SOCKET = 'kubelet.sock';
export const HEALTHY = 'Healthy';
export const UNHEALTHY = 'Unhealthy';

const protoDir = join(dirname(fileURLToPath(import.meta.url)), 'proto');
const loaderOptions: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
  objects: true,
};

export const devicePluginDefinition = protoLoader.loadSync(join(protoDir, 'deviceplugin-v1beta1.proto'), loaderOptions);
export const podResourcesDefinition = protoLoader.loadSync(join(protoDir, 'podresources-v1.proto'), loaderOptions);

type ServiceCtor = grpc.ServiceClientConstructor;
const dp = grpc.loadPackageDefinition(devicePluginDefinition) as unknown as {
  v1beta1: { Registration: ServiceCtor; DevicePlugin: ServiceCtor };
};
const pr = grpc.loadPackageDefinition(podResourcesDefinition) as unknown as { v1: { PodResourcesLister: ServiceCtor } };

export const RegistrationService = dp.v1beta1.Registration;
export const DevicePluginService = dp.v1beta1.DevicePlugin;
export const PodResourcesListerService = pr.v1.PodResourcesLister;

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

type MethodDef = { responseSerialize: (value: unknown) => Buffer };

/** Exact wire size of one ListAndWatch message, as the kubelet would receive it. */
export function encodedListAndWatchBytes(response: ListAndWatchResponse): number {
  const service = devicePluginDefinition['v1beta1.DevicePlugin'] as unknown as Record<string, MethodDef>;
  return (service['ListAndWatch'] as MethodDef).responseSerialize(response).length;
}

/** `unix:` target for a socket path (absolute paths need three slashes). */
export function unixTarget(socketPath: string): string {
  return `unix://${socketPath}`;
}
