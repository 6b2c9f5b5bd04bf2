/**
 * The kubelet's two gRPC APIs (device plugin v1beta1, PodResources v1), loaded from our .proto files
 * with field names kept exactly as the protos spell them (`ID`, `devices_ids`, `deviceIDs`); the
 * messages' types are in `protocol.ts`.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ListAndWatchResponse } from './protocol.js';

const protoDir = join(dirname(fileURLToPath(import.meta.url)), 'proto');
export const loaderOptions: protoLoader.Options = {
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

/** Stops a server: in-flight calls get `graceMs` to finish, then it is forced down. */
export async function shutdownServer(server: grpc.Server, graceMs = 1000): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
