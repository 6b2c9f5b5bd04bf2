/**
 * One device plugin's gRPC server on its own unix socket. It only speaks the kubelet protocol;
 * every decision is the handler's (the NVIDIA plugin's server/ResourceManager split).
 */
import { rmSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { messageOf, VcudaError } from '../../contract/index.js';
import { DevicePluginService, shutdownServer } from '../kubelet/grpc-services.js';
import type {
  AllocateRequest,
  AllocateResponse,
  ContainerAllocateResponse,
  ContainerPreferredAllocationRequest,
  Device,
  DevicePluginOptions,
  ListAndWatchResponse,
  PreferredAllocationRequest,
  PreferredAllocationResponse,
  PreStartContainerRequest,
} from '../kubelet/protocol.js';

/** What a plugin decides; declared here, implemented by the core and memory plugins. */
export interface PluginHandler {
  /** Full extended resource name, `<domain>/vcuda-core`. */
  readonly resourceName: string;
  readonly options: DevicePluginOptions;
  devices(): Device[];
  /** Calls `listener` whenever the device list (or a device's health) changes; returns unsubscribe. */
  watchDevices(listener: () => void): () => void;
  preferredAllocation(request: ContainerPreferredAllocationRequest): string[];
  allocate(deviceIds: string[]): Promise<ContainerAllocateResponse>;
  preStart(deviceIds: string[]): Promise<void>;
}

export type PluginServer = { socketPath: string; stop: () => Promise<void> };

function toStatus(err: unknown): Partial<grpc.StatusObject> {
  // A refusal is the caller's problem (precondition); anything else is ours.
  const code = err instanceof VcudaError ? grpc.status.FAILED_PRECONDITION : grpc.status.INTERNAL;
  return { code, details: messageOf(err) };
}

export async function startPluginServer(handler: PluginHandler, socketPath: string): Promise<PluginServer> {
  rmSync(socketPath, { force: true });
  const server = new grpc.Server();
  const streams = new Set<grpc.ServerWritableStream<unknown, ListAndWatchResponse>>();
  server.addService(DevicePluginService.service, {
    GetDevicePluginOptions: (_call: unknown, cb: grpc.sendUnaryData<DevicePluginOptions>) => cb(null, handler.options),
    ListAndWatch: (call: grpc.ServerWritableStream<unknown, ListAndWatchResponse>) => {
      streams.add(call);
      const send = () => {
        if (!call.cancelled && call.writable) call.write({ devices: handler.devices() });
      };
      const unsubscribe = handler.watchDevices(send);
      const done = () => {
        unsubscribe();
        streams.delete(call);
      };
      call.on('cancelled', done);
      call.on('close', done);
      call.on('error', done);
      send();
    },
    GetPreferredAllocation: (
      call: grpc.ServerUnaryCall<PreferredAllocationRequest, PreferredAllocationResponse>,
      cb: grpc.sendUnaryData<PreferredAllocationResponse>,
    ) => {
      try {
        cb(null, {
          container_responses: call.request.container_requests.map((r) => ({
            deviceIDs: handler.preferredAllocation(r),
          })),
        });
      } catch (err) {
        cb(toStatus(err));
      }
    },
    Allocate: (
      call: grpc.ServerUnaryCall<AllocateRequest, AllocateResponse>,
      cb: grpc.sendUnaryData<AllocateResponse>,
    ) => {
      Promise.all(call.request.container_requests.map((r) => handler.allocate(r.devices_ids))).then(
        (container_responses) => cb(null, { container_responses }),
        (err) => cb(toStatus(err)),
      );
    },
    PreStartContainer: (
      call: grpc.ServerUnaryCall<PreStartContainerRequest, object>,
      cb: grpc.sendUnaryData<object>,
    ) => {
      handler.preStart(call.request.devices_ids).then(
        () => cb(null, {}),
        (err) => cb(toStatus(err)),
      );
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    );
  });
  return {
    socketPath,
    stop: async () => {
      for (const s of streams) s.end();
      streams.clear();
      await shutdownServer(server);
      rmSync(socketPath, { force: true });
    },
  };
}
