/**
 * The kubelet's device manager as device plugins see it (PROTOCOLS.md §1, §2), the one model the
 * simulator's kubelet and the node agent's tests share: a Registration server on `kubelet.sock`, a
 * client per registered plugin (GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation,
 * Allocate, PreStartContainer), the record of which device IDs each container holds, and the
 * PodResources server that reports it. Like the kubelet it allocates every container of a pod at
 * admission (init containers first) and records the devices; PreStartContainer comes only when a
 * container starts; an init container's devices are handed on to the pod's later containers; a
 * plugin whose stream ends has its devices marked unhealthy; PodResources lists app containers
 * only; devices are given back when the pod ends.
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import {
  DevicePluginService,
  PodResourcesListerService,
  RegistrationService,
  unixTarget,
} from '../../node-agent/kubelet/grpc-services.js';
import {
  type AllocateResponse,
  type ContainerAllocateResponse,
  type Device,
  type DevicePluginOptions,
  HEALTHY,
  KUBELET_SOCKET,
  type ListAndWatchResponse,
  type PodResources,
  type PreferredAllocationResponse,
  type RegisterRequest,
} from '../../node-agent/kubelet/protocol.js';

type Endpoint = {
  request: RegisterRequest;
  options: DevicePluginOptions;
  client: grpc.Client;
  stream: grpc.ClientReadableStream<ListAndWatchResponse>;
  devices: Device[];
  /** ListAndWatch messages received. */
  updates: number;
};

export type KubeletContainer = { name: string; isInit?: boolean; requests: Record<string, number> };
/** A pod as admission sees it; without a uid, `namespace/name` stands for it. */
export type KubeletPod = { uid?: string; namespace: string; name: string; containers: KubeletContainer[] };
export type AdmitResult = { container: string; responses: Record<string, ContainerAllocateResponse> };
/** Told the wall time of every RPC the device manager makes to a plugin (benchmarks read it). */
export type RpcObserver = (method: string, ms: number) => void;

type PodRecord = {
  namespace: string;
  name: string;
  /** Plain init containers: PodResources does not list them. */
  inits: Set<string>;
  /** container → resource → device IDs. */
  containers: Map<string, Map<string, string[]>>;
};

const podUid = (pod: { uid?: string; namespace: string; name: string }) => pod.uid ?? `${pod.namespace}/${pod.name}`;

function orderedContainers(pod: KubeletPod): KubeletContainer[] {
  return [...pod.containers.filter((c) => c.isInit), ...pod.containers.filter((c) => !c.isInit)];
}

function bind(server: grpc.Server, socketPath: string): Promise<void> {
  rmSync(socketPath, { force: true });
  return new Promise((resolve, reject) =>
    server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
}

function shutdown(server: grpc.Server | undefined): Promise<void> {
  return server ? new Promise<void>((r) => server.tryShutdown(() => r())) : Promise.resolve();
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

/** The kubelet's directories under `root`: device-plugins/ (kubelet.sock) and pod-resources/. */
export function kubeletPaths(root: string): { pluginDir: string; podResourcesSocket: string } {
  const pluginDir = join(root, 'device-plugins');
  const prDir = join(root, 'pod-resources');
  mkdirSync(pluginDir, { recursive: true, mode: 0o750 });
  mkdirSync(prDir, { recursive: true });
  return { pluginDir, podResourcesSocket: join(prDir, 'kubelet.sock') };
}

export class DeviceManager {
  /** Every Register request accepted, in order. */
  readonly registrations: RegisterRequest[] = [];
  private readonly endpoints = new Map<string, Endpoint>();
  /** pod uid → what its containers hold. */
  private readonly pods = new Map<string, PodRecord>();
  /** resource → device IDs some pod holds or an admission has chosen. */
  private readonly inUse = new Map<string, Set<string>>();
  private registration: grpc.Server | undefined;
  private podResources: grpc.Server | undefined;
  private readonly listeners = new Set<() => void>();

  protected constructor(
    readonly pluginDir: string,
    readonly podResourcesSocket: string,
    private readonly onRpc: RpcObserver = () => {},
  ) {}

  static async start(root: string, onRpc?: RpcObserver): Promise<DeviceManager> {
    const { pluginDir, podResourcesSocket } = kubeletPaths(root);
    const m = new DeviceManager(pluginDir, podResourcesSocket, onRpc);
    await m.open();
    return m;
  }

  /** Opens the Registration and PodResources servers (`stop` closes them). */
  protected async open(): Promise<void> {
    await this.startRegistration();
    await this.startPodResources();
  }

  /** Called on every registration and device-list update. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  resources(): string[] {
    return [...this.endpoints.keys()];
  }

  devices(resource: string): Device[] {
    return this.endpoints.get(resource)?.devices ?? [];
  }

  updates(resource: string): number {
    return this.endpoints.get(resource)?.updates ?? 0;
  }

  healthyCount(resource: string): number {
    return this.devices(resource).filter((d) => d.health === HEALTHY).length;
  }

  /** Pod uid → container → resource → device IDs, as admission recorded them. */
  assignments(): Map<string, Map<string, Map<string, string[]>>> {
    return new Map([...this.pods.entries()].map(([uid, p]) => [uid, p.containers]));
  }

  private notify(): void {
    for (const l of this.listeners) l();
  }

  private call<Res>(client: grpc.Client, method: string, request: object, timeoutMs: number): Promise<Res> {
    const start = performance.now();
    const fn = (client as unknown as Record<string, (...a: unknown[]) => void>)[method]!;
    return new Promise((resolve, reject) => {
      fn.call(client, request, { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null, res: Res) => {
        this.onRpc(method, performance.now() - start);
        if (err) reject(err);
        else resolve(res);
      });
    });
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
        cb(null, { pod_resources: this.servePodResources() }),
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
        const { pod_namespace: namespace, pod_name: name } = c.request;
        const pod = this.listPodResources().find((p) => p.name === name && p.namespace === namespace);
        if (!pod) return cb({ code: grpc.status.NOT_FOUND, details: `pod ${namespace}/${name} not found` });
        cb(null, { pod_resources: pod });
      },
    });
    await bind(server, this.podResourcesSocket);
    this.podResources = server;
  }

  /** What PodResources `List` answers (a test double may count or rewrite it). */
  protected servePodResources(): PodResources[] {
    return this.listPodResources();
  }

  /** App containers only, as the kubelet reports them (plain init containers are not listed). */
  listPodResources(): PodResources[] {
    return [...this.pods.values()].map((p) => ({
      namespace: p.namespace,
      name: p.name,
      containers: [...p.containers.entries()]
        .filter(([name]) => !p.inits.has(name))
        .map(([name, resources]) => ({
          name,
          devices: [...resources.entries()].map(([resource_name, device_ids]) => ({ resource_name, device_ids })),
        })),
    }));
  }

  /** §1.4 steps 4–5: dial, GetDevicePluginOptions, then read ListAndWatch for as long as it lasts. */
  private async connect(request: RegisterRequest): Promise<void> {
    const old = this.endpoints.get(request.resource_name);
    old?.stream.cancel();
    old?.client.close();
    const client = new DevicePluginService(
      unixTarget(join(this.pluginDir, request.endpoint)),
      grpc.credentials.createInsecure(),
    );
    const options = await this.call<DevicePluginOptions>(client, 'GetDevicePluginOptions', {}, 10_000);
    const open = (
      client as unknown as Record<string, (req: object) => grpc.ClientReadableStream<ListAndWatchResponse>>
    )['ListAndWatch']!;
    const stream = open.call(client, {});
    const endpoint: Endpoint = { request, options, client, stream, devices: [], updates: 0 };
    stream.on('data', (msg: ListAndWatchResponse) => {
      endpoint.devices = msg.devices;
      endpoint.updates++;
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
    this.registrations.push(request);
    this.notify();
  }

  /**
   * The kubelet's devicesToAllocate: devices the pod's finished init containers hand on come first
   * (device reuse), then free healthy ones, asking the plugin's preference for the rest when it
   * offers one. The choice is marked in use with no await after the last check, as the kubelet's
   * mutex keeps two admissions from taking one device.
   */
  private async chooseDevices(ep: Endpoint, resource: string, count: number, reusable: Set<string>): Promise<string[]> {
    const used = this.inUse.get(resource) ?? new Set<string>();
    this.inUse.set(resource, used);
    const reused = [...reusable].slice(0, count);
    const need = count - reused.length;
    if (need === 0) return reused;
    const free = () => ep.devices.filter((d) => d.health === HEALTHY && !used.has(d.ID)).map((d) => d.ID);
    const unavailable = (have: number) =>
      new Error(`requested number of devices unavailable for ${resource}. Requested: ${need}, Available: ${have}`);
    const available = free();
    if (available.length < need) throw unavailable(available.length);
    let chosen = available.slice(0, need);
    if (ep.options.get_preferred_allocation_available) {
      const res = await this.call<PreferredAllocationResponse>(
        ep.client,
        'GetPreferredAllocation',
        {
          container_requests: [
            { available_deviceIDs: [...reused, ...available], must_include_deviceIDs: reused, allocation_size: count },
          ],
        },
        10_000,
      );
      // Another admission may have taken devices meanwhile: only what is still free counts.
      const preferred = (res.container_responses[0]?.deviceIDs ?? []).filter(
        (id) => !reused.includes(id) && !used.has(id),
      );
      chosen = preferred.length === need ? preferred : free().slice(0, need);
      if (chosen.length < need) throw unavailable(chosen.length);
    }
    for (const id of chosen) used.add(id);
    return [...reused, ...chosen];
  }

  /** One container's Allocate per resource it asks; its devices are recorded for PodResources. */
  private async allocateContainer(
    record: PodRecord,
    c: KubeletContainer,
    reusable: Map<string, Set<string>>,
  ): Promise<AdmitResult> {
    const responses: Record<string, ContainerAllocateResponse> = {};
    const held = new Map<string, string[]>();
    record.containers.set(c.name, held);
    for (const [resource, count] of Object.entries(c.requests)) {
      const ep = this.endpoints.get(resource);
      if (!ep || count <= 0) continue;
      const pool = reusable.get(resource) ?? new Set<string>();
      reusable.set(resource, pool);
      const ids = await this.chooseDevices(ep, resource, count, pool);
      held.set(resource, ids);
      const res = await this.call<AllocateResponse>(
        ep.client,
        'Allocate',
        { container_requests: [{ devices_ids: ids }] },
        30_000,
      );
      responses[resource] = res.container_responses[0]!;
      // A plain init container hands its devices on; an app container that took them keeps them.
      for (const id of ids) {
        if (c.isInit) pool.add(id);
        else pool.delete(id);
      }
    }
    return { container: c.name, responses };
  }

  /**
   * Admission: every container, init containers first, gets its devices and an Allocate per
   * resource (one container per call, as the kubelet does). Nothing starts here: `preStart` /
   * `startContainers` do PreStartContainer, as the kubelet does when a container starts. On failure
   * everything the pod got is given back and the error reads like the kubelet's.
   */
  async allocatePod(pod: KubeletPod): Promise<AdmitResult[]> {
    const uid = podUid(pod);
    const inits = new Set(pod.containers.filter((c) => c.isInit).map((c) => c.name));
    const record: PodRecord = { namespace: pod.namespace, name: pod.name, inits, containers: new Map() };
    this.pods.set(uid, record);
    const reusable = new Map<string, Set<string>>();
    const results: AdmitResult[] = [];
    try {
      for (const c of orderedContainers(pod)) results.push(await this.allocateContainer(record, c, reusable));
      return results;
    } catch (err) {
      this.releasePod(uid);
      throw new Error(`Allocate failed due to ${(err as Error).message}, which is unexpected`);
    }
  }

  /** A container is about to start: PreStartContainer for each resource whose plugin asks for it. */
  async preStart(uid: string, container: string): Promise<void> {
    for (const [resource, ids] of this.pods.get(uid)?.containers.get(container) ?? []) {
      const ep = this.endpoints.get(resource);
      if (!ep?.options.pre_start_required) continue;
      try {
        await this.call<object>(ep.client, 'PreStartContainer', { devices_ids: ids }, 30_000);
      } catch (err) {
        throw new Error(`PreStartContainer failed for ${uid} container ${container}: ${(err as Error).message}`);
      }
    }
  }

  /** Starting the pod's containers in order: PreStartContainer for each. */
  async startContainers(pod: KubeletPod): Promise<void> {
    for (const c of orderedContainers(pod)) await this.preStart(podUid(pod), c.name);
  }

  /** Admits a pod and starts its containers. */
  async admitPod(pod: KubeletPod): Promise<AdmitResult[]> {
    const results = await this.allocatePod(pod);
    await this.startContainers(pod);
    return results;
  }

  /** The pod ended: its devices are free again and PodResources stops listing it. */
  releasePod(uid: string): void {
    const record = this.pods.get(uid);
    this.pods.delete(uid);
    for (const held of record?.containers.values() ?? [])
      for (const [resource, ids] of held) for (const id of ids) this.inUse.get(resource)?.delete(id);
  }

  /** A kubelet restart: every socket in the directory goes, kubelet.sock comes back (§1.5). */
  async restart(): Promise<void> {
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
    await shutdown(s);
  }

  async stop(): Promise<void> {
    await this.stopRegistration();
    const s = this.podResources;
    this.podResources = undefined;
    await shutdown(s);
    this.listeners.clear();
  }
}
