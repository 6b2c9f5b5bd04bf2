/**
 * The kubelet's device manager as device plugins see it (PROTOCOLS.md §1, §2): a Registration
 * server on `kubelet.sock`, a client per registered plugin (GetDevicePluginOptions, ListAndWatch,
 * GetPreferredAllocation, Allocate, PreStartContainer), the record of which device IDs each
 * container holds, and the PodResources server that reports it. Devices are given back when a pod ends.
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import {
  type AllocateResponse,
  type ContainerAllocateResponse,
  type Device,
  type DevicePluginOptions,
  DevicePluginService,
  HEALTHY,
  KUBELET_SOCKET,
  type ListAndWatchResponse,
  type PodResources,
  PodResourcesListerService,
  type PreferredAllocationResponse,
  type RegisterRequest,
  RegistrationService,
  unixTarget,
} from '../../node-agent/device-plugin/protocol.js';

type Endpoint = {
  request: RegisterRequest;
  options: DevicePluginOptions;
  client: grpc.Client;
  stream: grpc.ClientReadableStream<ListAndWatchResponse>;
  devices: Device[];
};

export type ContainerRequest = { name: string; isInit: boolean; requests: Record<string, number> };

function call<Req, Res>(client: grpc.Client, method: string, request: Req, timeoutMs: number): Promise<Res> {
  const fn = (client as unknown as Record<string, (...a: unknown[]) => void>)[method]!;
  return new Promise((resolve, reject) => {
    fn.call(client, request, { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null, res: Res) =>
      err ? reject(err) : resolve(res),
    );
  });
}

function bind(server: grpc.Server, socketPath: string): Promise<void> {
  rmSync(socketPath, { force: true });
  return new Promise((resolve, reject) =>
    server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
}

/** Kubelet's own check of a Register request (§1.4 step 3). */
export function checkRegistration(r: RegisterRequest): string | undefined {
  if (r.version !== 'v1beta1') return `unsupported device plugin API version "${r.version}"`;
  const [domain, name] = r.resource_name.split('/');
  if (!domain || !name || r.resource_name.split('/').length !== 2)
    return `invalid extended resource name "${r.resource_name}"`;
  if (domain === 'kubernetes.io' || domain.endsWith('.kubernetes.io') || r.resource_name.startsWith('requests.')) {
    return `invalid extended resource name "${r.resource_name}"`;
  }
  if (!r.endpoint || r.endpoint.includes('/')) return `endpoint "${r.endpoint}" must be a socket file name`;
  return undefined;
}

export class DeviceManager {
  private readonly endpoints = new Map<string, Endpoint>();
  /** pod uid → container → resource → device IDs. */
  private readonly assigned = new Map<
    string,
    { namespace: string; name: string; containers: Map<string, Map<string, string[]>> }
  >();
  private registration: grpc.Server | undefined;
  private podResources: grpc.Server | undefined;
  private readonly listeners = new Set<() => void>();

  private constructor(
    readonly pluginDir: string,
    readonly podResourcesSocket: string,
  ) {}

  static async start(root: string): Promise<DeviceManager> {
    const pluginDir = join(root, 'device-plugins');
    const prDir = join(root, 'pod-resources');
    mkdirSync(pluginDir, { recursive: true, mode: 0o750 });
    mkdirSync(prDir, { recursive: true });
    const m = new DeviceManager(pluginDir, join(prDir, 'kubelet.sock'));
    await m.startRegistration();
    await m.startPodResources();
    return m;
  }

  /** Called on every registration and device-list update. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  resources(): string[] {
    return [...this.endpoints.keys()];
  }

  healthyCount(resource: string): number {
    return (this.endpoints.get(resource)?.devices ?? []).filter((d) => d.health === HEALTHY).length;
  }

  private notify(): void {
    for (const l of this.listeners) l();
  }

  private async startRegistration(): Promise<void> {
    const server = new grpc.Server();
    server.addService(RegistrationService.service, {
      Register: (c: grpc.ServerUnaryCall<RegisterRequest, object>, cb: grpc.sendUnaryData<object>) => {
        const bad = checkRegistration(c.request);
        if (bad) return cb({ code: grpc.status.INVALID_ARGUMENT, details: bad });
        this.connect(c.request).then(
          () => cb(null, {}),
          (err: Error) => cb({ code: grpc.status.UNKNOWN, details: `failed to dial device plugin: ${err.message}` }),
        );
      },
    });
    await bind(server, join(this.pluginDir, KUBELET_SOCKET));
    this.registration = server;
  }

  private async startPodResources(): Promise<void> {
    const server = new grpc.Server();
    server.addService(PodResourcesListerService.service, {
      List: (_c: unknown, cb: grpc.sendUnaryData<{ pod_resources: PodResources[] }>) =>
        cb(null, { pod_resources: this.listPodResources() }),
      GetAllocatableResources: (_c: unknown, cb: grpc.sendUnaryData<object>) =>
        cb(null, {
          devices: [...this.endpoints.entries()].map(([resource_name, ep]) => ({
            resource_name,
            device_ids: ep.devices.map((d) => d.ID),
          })),
        }),
      Get: (
        c: grpc.ServerUnaryCall<{ pod_name: string; pod_namespace: string }, object>,
        cb: grpc.sendUnaryData<object>,
      ) => {
        const pod = this.listPodResources().find(
          (p) => p.name === c.request.pod_name && p.namespace === c.request.pod_namespace,
        );
        if (!pod)
          return cb({
            code: grpc.status.NOT_FOUND,
            details: `pod ${c.request.pod_namespace}/${c.request.pod_name} not found`,
          });
        cb(null, { pod_resources: pod });
      },
    });
    await bind(server, this.podResourcesSocket);
    this.podResources = server;
  }

  listPodResources(): PodResources[] {
    return [...this.assigned.values()].map((p) => ({
      namespace: p.namespace,
      name: p.name,
      containers: [...p.containers.entries()].map(([name, resources]) => ({
        name,
        devices: [...resources.entries()].map(([resource_name, device_ids]) => ({ resource_name, device_ids })),
      })),
    }));
  }

  /** §1.4 steps 4–5: dial, GetDevicePluginOptions, then read ListAndWatch for as long as it lasts. */
  private async connect(request: RegisterRequest): Promise<void> {
    const old = this.endpoints.get(request.resource_name);
    if (old) {
      old.stream.cancel();
      old.client.close();
    }
    const client = new DevicePluginService(
      unixTarget(join(this.pluginDir, request.endpoint)),
      grpc.credentials.createInsecure(),
    );
    const options = await call<object, DevicePluginOptions>(client, 'GetDevicePluginOptions', {}, 10_000);
    const open = (
      client as unknown as Record<string, (req: object) => grpc.ClientReadableStream<ListAndWatchResponse>>
    )['ListAndWatch']!;
    const stream = open.call(client, {});
    const endpoint: Endpoint = { request, options, client, stream, devices: [] };
    stream.on('data', (msg: ListAndWatchResponse) => {
      endpoint.devices = msg.devices;
      this.notify();
    });
    // A closed stream means the plugin is gone: its devices become unhealthy (§1.4 step 5).
    const lost = () => {
      if (this.endpoints.get(request.resource_name) !== endpoint) return;
      endpoint.devices = endpoint.devices.map((d) => ({ ...d, health: 'Unhealthy' }));
      this.notify();
    };
    stream.on('error', lost);
    stream.on('end', lost);
    this.endpoints.set(request.resource_name, endpoint);
    this.notify();
  }

  private inUse(resource: string): Set<string> {
    const used = new Set<string>();
    for (const p of this.assigned.values())
      for (const r of p.containers.values()) for (const id of r.get(resource) ?? []) used.add(id);
    return used;
  }

  private async chooseDevices(ep: Endpoint, resource: string, count: number): Promise<string[]> {
    const used = this.inUse(resource);
    const available = ep.devices.filter((d) => d.health === HEALTHY && !used.has(d.ID)).map((d) => d.ID);
    if (available.length < count)
      throw new Error(
        `requested number of devices unavailable for ${resource}. Requested: ${count}, Available: ${available.length}`,
      );
    if (ep.options.get_preferred_allocation_available) {
      const res = await call<object, PreferredAllocationResponse>(
        ep.client,
        'GetPreferredAllocation',
        {
          container_requests: [{ available_deviceIDs: available, must_include_deviceIDs: [], allocation_size: count }],
        },
        10_000,
      );
      const preferred = (res.container_responses[0]?.deviceIDs ?? []).filter((id) => available.includes(id));
      if (preferred.length === count) return preferred;
    }
    return available.slice(0, count);
  }

  /**
   * Admits one pod: for each container (init first) and each device-plugin resource it asks,
   * choose devices, Allocate (one container per call, as the kubelet does), then PreStartContainer.
   * On failure everything this pod got is given back and the error reads like the kubelet's.
   */
  async admitPod(
    pod: { uid: string; namespace: string; name: string },
    containers: ContainerRequest[],
  ): Promise<Map<string, ContainerAllocateResponse[]>> {
    const out = new Map<string, ContainerAllocateResponse[]>();
    const record = { namespace: pod.namespace, name: pod.name, containers: new Map<string, Map<string, string[]>>() };
    this.assigned.set(pod.uid, record);
    try {
      const ordered = [...containers.filter((c) => c.isInit), ...containers.filter((c) => !c.isInit)];
      for (const c of ordered) {
        const responses: ContainerAllocateResponse[] = [];
        const perResource = new Map<string, string[]>();
        record.containers.set(c.name, perResource);
        for (const [resource, count] of Object.entries(c.requests)) {
          const ep = this.endpoints.get(resource);
          if (!ep || count <= 0) continue;
          const ids = await this.chooseDevices(ep, resource, count);
          perResource.set(resource, ids);
          const res = await call<object, AllocateResponse>(
            ep.client,
            'Allocate',
            { container_requests: [{ devices_ids: ids }] },
            30_000,
          );
          responses.push(res.container_responses[0]!);
          if (ep.options.pre_start_required)
            await call<object, object>(ep.client, 'PreStartContainer', { devices_ids: ids }, 30_000);
        }
        out.set(c.name, responses);
      }
      return out;
    } catch (err) {
      this.assigned.delete(pod.uid);
      throw new Error(`Allocate failed due to ${(err as Error).message}, which is unexpected`);
    }
  }

  /** The pod ended: its devices are free again and PodResources stops listing it. */
  releasePod(uid: string): void {
    this.assigned.delete(uid);
  }

  /** Simulates a kubelet restart: every plugin socket is removed, kubelet.sock comes back (§1.5). */
  async restartRegistration(): Promise<void> {
    await this.stopRegistration();
    for (const f of readdirSync(this.pluginDir)) rmSync(join(this.pluginDir, f), { force: true });
    await this.startRegistration();
  }

  private async stopRegistration(): Promise<void> {
    for (const ep of this.endpoints.values()) {
      ep.stream.cancel();
      ep.client.close();
    }
    this.endpoints.clear();
    const s = this.registration;
    this.registration = undefined;
    if (s) await new Promise<void>((r) => s.tryShutdown(() => r()));
  }

  async stop(): Promise<void> {
    await this.stopRegistration();
    const s = this.podResources;
    this.podResources = undefined;
    if (s) await new Promise<void>((r) => s.tryShutdown(() => r()));
    this.listeners.clear();
  }
}
