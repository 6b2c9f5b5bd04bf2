/**
 * The node agent in DRA mode over a fake GPU source, an in-memory API server for claims and
 * slices, and temp directories for the kubelet's plugin dirs, limit files and CDI specs; plus
 * @grpc/grpc-js clients of the plugin's real unix sockets, built from the project's protos.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { type NodeAgentConfig, parseConfig } from '../../../node-agent/config.js';
import { type DraAgent, startDraAgent } from '../../../node-agent/dra/dra-agent.js';
import type { DraSockets } from '../../../node-agent/dra/plugin-server.js';
import type { ResourceSlice } from '../../../node-agent/dra/resource-slice.js';
import type { ResourceSliceApi } from '../../../node-agent/dra/slice-publisher.js';
import type {
  DraClaimRef,
  NodePrepareResourcesResponse,
  NodeUnprepareResourcesResponse,
  PluginInfo,
} from '../../../node-agent/kubelet/dra-protocol.js';
import {
  DraPluginV1beta1Service,
  DraPluginV1Service,
  PluginRegistrationService,
} from '../../../node-agent/kubelet/dra-services.js';
import { unixTarget } from '../../../node-agent/kubelet/grpc-services.js';
import type { GpuSource } from '../../../node-agent/nvml/gpu-source.js';
import type { UsageSink } from '../../../node-agent/usage.js';
import { FakeGpuSource } from './fake-gpu-source.js';
import { recordingLog } from './recording-log.js';

/** Claims and slices as an API server keeps them; `writes` counts slice writes. */
export class MemoryResourceApi implements ResourceSliceApi {
  readonly claims = new Map<string, unknown>();
  readonly slices = new Map<string, ResourceSlice>();
  private rv = 0;

  putClaim(obj: { metadata: { namespace: string; name: string } }): void {
    this.claims.set(`${obj.metadata.namespace}/${obj.metadata.name}`, obj);
  }
  async readClaim(namespace: string, name: string): Promise<unknown> {
    const c = this.claims.get(`${namespace}/${name}`);
    if (!c) throw Object.assign(new Error(`resourceclaims "${name}" not found`), { code: 404 });
    return structuredClone(c);
  }
  async listSlices(driver: string, nodeName: string): Promise<ResourceSlice[]> {
    return [...this.slices.values()].filter((s) => s.spec.driver === driver && s.spec.nodeName === nodeName);
  }
  async createSlice(slice: ResourceSlice): Promise<string> {
    if (this.slices.has(slice.metadata.name)) throw Object.assign(new Error('already exists'), { code: 409 });
    return this.store(slice);
  }
  async replaceSlice(slice: ResourceSlice): Promise<string> {
    if (this.slices.get(slice.metadata.name)?.metadata.resourceVersion !== slice.metadata.resourceVersion) {
      throw Object.assign(new Error('conflict'), { code: 409 });
    }
    return this.store(slice);
  }
  async deleteSlice(name: string): Promise<void> {
    this.slices.delete(name);
  }
  private store(slice: ResourceSlice): string {
    const resourceVersion = String(++this.rv);
    this.slices.set(
      slice.metadata.name,
      structuredClone({ ...slice, metadata: { ...slice.metadata, resourceVersion } }),
    );
    return resourceVersion;
  }
}

type Unary = (req: object, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => void;

function call<T>(client: grpc.Client, method: string, req: object): Promise<T> {
  const fn = (client as unknown as Record<string, Unary>)[method] as Unary;
  return new Promise((resolve, reject) =>
    fn.call(client, req, { deadline: Date.now() + 10_000 }, (err, res) => (err ? reject(err) : resolve(res as T))),
  );
}

/** A kubelet's view of the plugin: registration, then DRAPlugin of one version. */
export class DraKubeletClient {
  /** One connection per service, kept, as the kubelet keeps its connection to a plugin. */
  private readonly clients = new Map<grpc.ServiceClientConstructor, grpc.Client>();

  /** `agent`: the DRA agent, or any server of the same two sockets (a benchmark's do-nothing one). */
  constructor(private readonly agent: { server: DraSockets }) {}

  private open(ctor: grpc.ServiceClientConstructor, socket: string): grpc.Client {
    const known = this.clients.get(ctor);
    if (known) return known;
    const c = new ctor(unixTarget(socket), grpc.credentials.createInsecure());
    this.clients.set(ctor, c);
    return c;
  }

  async register(): Promise<PluginInfo> {
    const reg = this.open(PluginRegistrationService, this.agent.server.registrationSocket);
    const info = await call<PluginInfo>(reg, 'GetInfo', {});
    await call(reg, 'NotifyRegistrationStatus', { plugin_registered: true, error: '' });
    return info;
  }

  prepare(version: 'v1' | 'v1beta1', claims: DraClaimRef[]): Promise<NodePrepareResourcesResponse> {
    const ctor = version === 'v1' ? DraPluginV1Service : DraPluginV1beta1Service;
    return call(this.open(ctor, this.agent.server.draSocket), 'NodePrepareResources', { claims });
  }

  unprepare(version: 'v1' | 'v1beta1', claims: DraClaimRef[]): Promise<NodeUnprepareResourcesResponse> {
    const ctor = version === 'v1' ? DraPluginV1Service : DraPluginV1beta1Service;
    return call(this.open(ctor, this.agent.server.draSocket), 'NodeUnprepareResources', { claims });
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

export type DraHarness = {
  root: string;
  config: NodeAgentConfig;
  api: MemoryResourceApi;
  gpu: GpuSource;
  agent: DraAgent;
  kubelet: DraKubeletClient;
  lines: string[];
  /** Stops the agent (the directories stay: `restart` starts a new agent on them). */
  stop(): Promise<void>;
  restart(): Promise<DraHarness>;
  /** Stops the agent and removes the directories. */
  close(): Promise<void>;
};

/**
 * A DRA-mode agent config with every host path under `root` (the kubelet's plugin directories
 * `<root>/reg` and `<root>/plugins` unless `dra` names the kubelet's own).
 */
export function draAgentConfig(
  root: string,
  opts: {
    nodeName?: string;
    dra?: { pluginsRegistryDir: string; pluginsDir: string };
    paths?: Record<string, unknown>;
    config?: Record<string, unknown>;
  } = {},
): NodeAgentConfig {
  return parseConfig({
    flags: {
      nodeName: opts.nodeName ?? 'node-1',
      mode: 'dra',
      dra: opts.dra ?? { pluginsRegistryDir: join(root, 'reg'), pluginsDir: join(root, 'plugins') },
      paths: {
        containersDir: join(root, 'containers'),
        cdiSpecDir: join(root, 'cdi'),
        preloadHostPath: join(root, 'ld.so.preload'),
        libvcudaHostPath: join(root, 'libvcuda.so'),
        devDir: join(root, 'dev'),
        // A /proc of its own: the host-pid map would otherwise scan this machine's every process.
        procRoot: join(root, 'proc'),
        ...opts.paths,
      },
      // Dynamic MIG's intents under the test's root, never /run.
      mig: { checkpointPath: join(root, 'dynamic-mig.json') },
      ...opts.config,
    },
  });
}

export async function startDraHarness(
  opts: {
    root?: string;
    api?: MemoryResourceApi;
    gpu?: () => GpuSource;
    config?: Record<string, unknown>;
    paths?: Record<string, unknown>;
    /** Where the agent reports the prepared claims' usage (the control plane's route); absent: not reported. */
    usageSink?: UsageSink;
  } = {},
): Promise<DraHarness> {
  const root = opts.root ?? mkdtempSync(join(tmpdir(), 'dra-'));
  const config = draAgentConfig(root, {
    ...(opts.paths ? { paths: opts.paths } : {}),
    ...(opts.config ? { config: opts.config } : {}),
  });
  const api = opts.api ?? new MemoryResourceApi();
  const gpu = opts.gpu?.() ?? new FakeGpuSource({ cards: 2, memoryMiB: 81920 });
  const { log, lines } = recordingLog();
  const agent = await startDraAgent({
    config,
    gpu,
    claims: api,
    slices: api,
    log,
    nodeUid: 'node-1-uid',
    ...(opts.usageSink ? { usageSink: opts.usageSink } : {}),
  });
  const kubelet = new DraKubeletClient(agent);
  const stop = async () => {
    kubelet.close();
    await agent.stop();
  };
  const h: DraHarness = {
    root,
    config,
    api,
    gpu,
    agent,
    kubelet,
    lines,
    stop,
    restart: async () => {
      await stop();
      return startDraHarness({ ...opts, root, api });
    },
    close: async () => {
      await stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
  return h;
}
