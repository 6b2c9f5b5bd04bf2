/**
 * The kubelet DRA plugin's two unix sockets. `<registryDir>/<driver>-reg.sock` serves plugin
 * registration: the kubelet's plugin watcher finds it, calls GetInfo (type DRAPlugin, the driver
 * name, the DRA socket, `v1.DRAPlugin` and `v1beta1.DRAPlugin`) and reports the outcome with
 * NotifyRegistrationStatus. `<pluginDir>/dra.sock` serves DRAPlugin v1 and v1beta1 with the same
 * handlers. It only speaks the protocol: every decision is the preparer's.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { AgentLog } from '../agent-log.js';
import {
  DRA_PLUGIN_TYPE,
  DRA_SERVICE_VERSIONS,
  type DraClaimRef,
  type NodePrepareResourceResponse,
  type PluginInfo,
  type RegistrationStatus,
} from '../kubelet/dra-protocol.js';
import { DraPluginV1beta1Service, DraPluginV1Service, PluginRegistrationService } from '../kubelet/dra-services.js';
import { shutdownServer } from '../kubelet/grpc-services.js';

/** At most this many claims in one call (a pod has far fewer; the bound keeps one call finite). */
const MAX_CLAIMS_PER_CALL = 256;

/** What the server asks of the driver; declared here, implemented by ClaimPreparer. */
export interface ClaimHandler {
  prepare(claim: DraClaimRef): Promise<NodePrepareResourceResponse>;
  unprepare(claim: DraClaimRef): Promise<{ error: string }>;
}

export type DraSockets = { registrationSocket: string; draSocket: string };

export type DraPluginServer = DraSockets & {
  /** The kubelet's last NotifyRegistrationStatus: registered, or why not (undefined: not yet told). */
  registration(): RegistrationStatus | undefined;
  stop(): Promise<void>;
};

export function draSockets(driver: string, registryDir: string, pluginDir: string): DraSockets {
  return { registrationSocket: join(registryDir, `${driver}-reg.sock`), draSocket: join(pluginDir, 'dra.sock') };
}

function tooMany(n: number): Partial<grpc.StatusObject> | undefined {
  return n > MAX_CLAIMS_PER_CALL
    ? { code: grpc.status.INVALID_ARGUMENT, details: `${n} claims in one call; at most ${MAX_CLAIMS_PER_CALL}` }
    : undefined;
}

/** One claim call: each claim answered by `answer`, keyed by its uid, as the kubelet expects. */
function perClaim<T>(answer: (claim: DraClaimRef) => Promise<T>) {
  return (
    call: grpc.ServerUnaryCall<{ claims: DraClaimRef[] }, unknown>,
    cb: grpc.sendUnaryData<{ claims: Record<string, T> }>,
  ) => {
    const bad = tooMany(call.request.claims.length);
    if (bad) return cb(bad);
    Promise.all(call.request.claims.map(async (c) => [c.uid, await answer(c)] as const)).then(
      (entries) => cb(null, { claims: Object.fromEntries(entries) }),
      (err: Error) => cb({ code: grpc.status.INTERNAL, details: err.message }),
    );
  };
}

function draHandlers(handler: ClaimHandler): grpc.UntypedServiceImplementation {
  return {
    NodePrepareResources: perClaim((c) => handler.prepare(c)),
    NodeUnprepareResources: perClaim((c) => handler.unprepare(c)),
  };
}

async function serve(server: grpc.Server, socketPath: string): Promise<void> {
  mkdirSync(join(socketPath, '..'), { recursive: true });
  rmSync(socketPath, { force: true });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
}

/** Serves the DRA socket first, then the registration socket: the kubelet may dial the endpoint at once. */
export async function startDraPluginServer(
  opts: { driver: string; registryDir: string; pluginDir: string; handler: ClaimHandler },
  log: Pick<AgentLog, 'info' | 'warn'>,
): Promise<DraPluginServer> {
  const sockets = draSockets(opts.driver, opts.registryDir, opts.pluginDir);
  const dra = new grpc.Server();
  const handlers = draHandlers(opts.handler);
  dra.addService(DraPluginV1Service.service, handlers);
  dra.addService(DraPluginV1beta1Service.service, handlers);
  await serve(dra, sockets.draSocket);
  let status: RegistrationStatus | undefined;
  const reg = new grpc.Server();
  const info: PluginInfo = {
    type: DRA_PLUGIN_TYPE,
    name: opts.driver,
    endpoint: sockets.draSocket,
    supported_versions: [...DRA_SERVICE_VERSIONS],
  };
  reg.addService(PluginRegistrationService.service, {
    GetInfo: (_call: unknown, cb: grpc.sendUnaryData<PluginInfo>) => cb(null, info),
    NotifyRegistrationStatus: (
      call: grpc.ServerUnaryCall<RegistrationStatus, object>,
      cb: grpc.sendUnaryData<object>,
    ) => {
      status = { plugin_registered: call.request.plugin_registered, error: call.request.error };
      if (status.plugin_registered) log.info(`DRA driver ${opts.driver} registered with the kubelet`);
      else log.warn(`the kubelet refused DRA driver ${opts.driver}: ${status.error}`);
      cb(null, {});
    },
  });
  try {
    await serve(reg, sockets.registrationSocket);
  } catch (err) {
    await shutdownServer(dra);
    throw err;
  }
  return {
    ...sockets,
    registration: () => status,
    stop: async () => {
      // Registration first: the kubelet stops using a driver whose registration socket is gone.
      await shutdownServer(reg);
      rmSync(sockets.registrationSocket, { force: true });
      await shutdownServer(dra);
      rmSync(sockets.draSocket, { force: true });
    },
  };
}
