/**
 * A kubelet as far as device plugins can tell, written from PROTOCOLS.md §1 and §2: a Registration
 * server on `kubelet.sock`, a client that dials each registered plugin, reads ListAndWatch and
 * calls GetPreferredAllocation / Allocate / PreStartContainer, and a PodResources server that
 * reports which devices went to which container. Like the kubelet it allocates every container of
 * a pod at admission, records the devices, and calls PreStartContainer only when a container
 * starts; it hands an init container's devices on to later containers of the pod, and its
 * PodResources lists app containers only. For tests and the simulator; never product code.
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
} from '../../../node-agent/device-plugin/protocol.js';

type Endpoint = {
  request: RegisterRequest;
  options: DevicePluginOptions;
  client: grpc.Client;
  stream: grpc.ClientReadableStream<ListAndWatchResponse>;
  devices: Device[];
  updates: number;
};

export type KubeletContainer = { name: string; isInit?: boolean; requests: Record<string, number> };
export type KubeletPod = { namespace: string; name: string; containers: KubeletContainer[] };
export type AdmitResult = { container: string; responses: Record<string, ContainerAllocateResponse> };

/** Wall time of every RPC the fake kubelet made, by method (for benchmarks). */
export const rpcTimingsMs: Record<string, number[]> = {};

function call<Req, Res>(client: grpc.Client, method: string, request: Req, timeoutMs = 30_000): Promise<Res> {
  const start = performance.now();
  const record = () => {
    rpcTimingsMs[method] ??= [];
    rpcTimingsMs[method].push(performance.now() - start);
  };
  // biome-ignore lint/suspicious/noExplicitAny: generated gRPC clients are untyped.
  const fn = (client as unknown as Record<string, any>)[method] as (...args: unknown[]) => void;
  return new Promise((resolve, reject) => {
    fn.call(client, request, { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null, res: Res) => {
      record();
      if (err) reject(err);
      else resolve(res);
    });
  });
}

export class FakeKubelet {
  readonly registrations: RegisterRequest[] = [];
  private readonly endpoints = new Map<string, Endpoint>();
  /** pod key → container → resource → device IDs (what PodResources reports). */
  readonly podDevices = new Map<string, Map<string, Map<string, string[]>>>();
  private readonly inUse = new Map<string, Set<string>>();
  /** pod key → its plain init containers (PodResources does not list them). */
  private readonly initContainers = new Map<string, Set<string>>();
  private registration: grpc.Server | undefined;
  private podResources: grpc.Server | undefined;
  private readonly listeners = new Set<() => void>();
  /** Test hook: rewrite what PodResources reports (to prove a mismatch fails loudly). */
  tamper: ((pods: PodResources[]) => PodResources[]) | undefined;
  /** PodResources List calls served (the real kubelet rate-limits them: 100 QPS, burst 10). */
  listCalls = 0;

  private constructor(
    readonly pluginDir: string,
    readonly podResourcesSocket: string,
  ) {}

  static async start(root: string): Promise<FakeKubelet> {
    const pluginDir = join(root, 'device-plugins');
    const prDir = join(root, 'pod-resources');
    mkdirSync(pluginDir, { recursive: true });
    mkdirSync(prDir, { recursive: true });
    const k = new FakeKubelet(pluginDir, join(prDir, 'kubelet.sock'));
    await k.startRegistration();
    await k.startPodResources();
    return k;
  }

  private notify(): void {
    for (const l of this.listeners) l();
  }

  /** Resolves when `predicate` holds, re-checked on every registration and device update. */
  waitFor(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`fake kubelet: timed out waiting for ${what}`));
      }, timeoutMs);
      const check = () => {
        if (!predicate()) return;
        clearTimeout(timer);
        this.listeners.delete(check);
        resolve();
      };
      this.listeners.add(check);
    });
  }

  devices(resource: string): Device[] {
    return this.endpoints.get(resource)?.devices ?? [];
  }

  updates(resource: string): number {
    return this.endpoints.get(resource)?.updates ?? 0;
  }

  private async startRegistration(): Promise<void> {
    const server = new grpc.Server();
    server.addService(RegistrationService.service, {
      Register: (call: grpc.ServerUnaryCall<RegisterRequest, object>, cb: grpc.sendUnaryData<object>) => {
        this.connect(call.request).then(
          () => cb(null, {}),
          (err: Error) => cb({ code: grpc.status.UNKNOWN, details: err.message }),
        );
      },
    });
    await bind(server, join(this.pluginDir, KUBELET_SOCKET));
    this.registration = server;
  }

  private async startPodResources(): Promise<void> {
    const server = new grpc.Server();
    server.addService(PodResourcesListerService.service, {
      List: (_call: unknown, cb: grpc.sendUnaryData<{ pod_resources: PodResources[] }>) => {
        this.listCalls++;
        const pods = this.listPodResources();
        cb(null, { pod_resources: this.tamper ? this.tamper(pods) : pods });
      },
      GetAllocatableResources: (_call: unknown, cb: grpc.sendUnaryData<object>) => cb(null, { devices: [] }),
      Get: (_call: unknown, cb: grpc.sendUnaryData<object>) => cb({ code: grpc.status.UNIMPLEMENTED }),
    });
    await bind(server, this.podResourcesSocket);
    this.podResources = server;
  }

  /** What `List` reports: app containers only, as the kubelet does (plain init containers are not listed). */
  listPodResources(): PodResources[] {
    return [...this.podDevices.entries()].map(([key, containers]) => {
      const [namespace = '', name = ''] = key.split('/');
      const inits = this.initContainers.get(key) ?? new Set<string>();
      return {
        namespace,
        name,
        containers: [...containers.entries()]
          .filter(([cname]) => !inits.has(cname))
          .map(([cname, resources]) => ({
            name: cname,
            devices: [...resources.entries()].map(([resource_name, device_ids]) => ({ resource_name, device_ids })),
          })),
      };
    });
  }

  /** What the kubelet does on Register (§1.4): check, dial, GetDevicePluginOptions, ListAndWatch. */
  private async connect(request: RegisterRequest): Promise<void> {
    if (request.version !== 'v1beta1') throw new Error(`unsupported version ${request.version}`);
    if (!request.resource_name.includes('/')) throw new Error(`${request.resource_name} is not an extended resource`);
    this.endpoints.get(request.resource_name)?.client.close();
    const client = new DevicePluginService(
      unixTarget(join(this.pluginDir, request.endpoint)),
      grpc.credentials.createInsecure(),
    );
    const options = await call<object, DevicePluginOptions>(client, 'GetDevicePluginOptions', {}, 10_000);
    const listAndWatch = (client as unknown as Record<string, (req: object) => unknown>)['ListAndWatch'] as (
      req: object,
    ) => grpc.ClientReadableStream<ListAndWatchResponse>;
    const stream = listAndWatch.call(client, {});
    const endpoint: Endpoint = { request, options, client, stream, devices: [], updates: 0 };
    stream.on('data', (msg: ListAndWatchResponse) => {
      endpoint.devices = msg.devices;
      endpoint.updates++;
      this.notify();
    });
    stream.on('error', () => {});
    this.endpoints.set(request.resource_name, endpoint);
    this.registrations.push(request);
    this.notify();
  }

  /**
   * The kubelet's devicesToAllocate: devices the pod's finished init containers hand on come first
   * (device reuse), then free healthy ones, asking the plugin's preference for the rest when it
   * offers one. The choice is made and marked in use before any await, as the kubelet's mutex does.
   */
  private async chooseDevices(resource: string, count: number, reusable: Set<string>): Promise<string[]> {
    const ep = this.endpoints.get(resource);
    if (!ep) throw new Error(`no device plugin for ${resource}`);
    const used = this.inUse.get(resource) ?? new Set<string>();
    this.inUse.set(resource, used);
    const reused = [...reusable].slice(0, count);
    const need = count - reused.length;
    if (need === 0) return reused;
    const free = () => ep.devices.filter((d) => d.health === HEALTHY && !used.has(d.ID)).map((d) => d.ID);
    const available = free();
    if (available.length < need) throw new Error(`insufficient ${resource}: want ${need}, have ${available.length}`);
    let chosen = available.slice(0, need);
    if (ep.options.get_preferred_allocation_available) {
      const res = await call<object, PreferredAllocationResponse>(ep.client, 'GetPreferredAllocation', {
        container_requests: [
          { available_deviceIDs: [...reused, ...available], must_include_deviceIDs: reused, allocation_size: count },
        ],
      });
      // Another admission may have taken devices meanwhile: only what is still free counts.
      const preferred = (res.container_responses[0]?.deviceIDs ?? []).filter(
        (id) => !reused.includes(id) && !used.has(id),
      );
      chosen = preferred.length === need ? preferred : free().slice(0, need);
      if (chosen.length < need) throw new Error(`insufficient ${resource}: want ${need}, have ${chosen.length}`);
    }
    for (const id of chosen) used.add(id);
    return [...reused, ...chosen];
  }

  /**
   * Admission (the kubelet's device manager): for each container, init containers first, and each
   * resource, choose devices, Allocate, then record them for the container, which PodResources
   * then reports. A plain init container's devices are handed on to the pod's later containers.
   * Nothing starts here: `startContainers` does PreStartContainer, as the kubelet does at start.
   */
  async allocatePod(pod: KubeletPod): Promise<AdmitResult[]> {
    const key = `${pod.namespace}/${pod.name}`;
    const results: AdmitResult[] = [];
    const reusable = new Map<string, Set<string>>();
    this.initContainers.set(key, new Set(pod.containers.filter((c) => c.isInit).map((c) => c.name)));
    for (const c of orderedContainers(pod)) {
      const responses: Record<string, ContainerAllocateResponse> = {};
      for (const [resource, count] of Object.entries(c.requests)) {
        const ep = this.endpoints.get(resource);
        if (!ep || count <= 0) continue;
        const pool = reusable.get(resource) ?? new Set<string>();
        reusable.set(resource, pool);
        const ids = await this.chooseDevices(resource, count, pool);
        try {
          const res = await call<object, AllocateResponse>(ep.client, 'Allocate', {
            container_requests: [{ devices_ids: ids }],
          });
          responses[resource] = res.container_responses[0] as ContainerAllocateResponse;
        } catch (err) {
          for (const id of ids) if (!pool.has(id)) this.inUse.get(resource)?.delete(id);
          throw new Error(`UnexpectedAdmissionError: Allocate failed due to ${(err as Error).message}`);
        }
        this.record(key, c.name, resource, ids);
        if (c.isInit) for (const id of ids) pool.add(id);
        else for (const id of ids) pool.delete(id);
      }
      results.push({ container: c.name, responses });
    }
    return results;
  }

  private record(podKey: string, container: string, resource: string, ids: string[]): void {
    const perContainer = this.podDevices.get(podKey) ?? new Map<string, Map<string, string[]>>();
    this.podDevices.set(podKey, perContainer);
    const perResource = perContainer.get(container) ?? new Map<string, string[]>();
    perContainer.set(container, perResource);
    perResource.set(resource, ids);
  }

  /** Starting the pod's containers in order: PreStartContainer for each, as the kubelet does. */
  async startContainers(pod: KubeletPod): Promise<void> {
    for (const c of orderedContainers(pod)) await this.preStart(`${pod.namespace}/${pod.name}`, c.name);
  }

  /** Admits a pod and starts its containers. */
  async admitPod(pod: KubeletPod): Promise<AdmitResult[]> {
    const results = await this.allocatePod(pod);
    await this.startContainers(pod);
    return results;
  }

  async preStart(podKey: string, container: string): Promise<void> {
    const resources = this.podDevices.get(podKey)?.get(container);
    for (const [resource, ids] of resources ?? []) {
      const ep = this.endpoints.get(resource);
      if (!ep?.options.pre_start_required) continue;
      try {
        await call<object, object>(ep.client, 'PreStartContainer', { devices_ids: ids }, 30_000);
      } catch (err) {
        throw new Error(`PreStartContainer failed for ${podKey} container ${container}: ${(err as Error).message}`);
      }
    }
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
