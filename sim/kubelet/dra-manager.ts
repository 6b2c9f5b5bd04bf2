/**
 * The kubelet's DRA manager, as DRA drivers see it: a plugin watcher over `plugins_registry/`
 * (GetInfo, a `DRAPlugin` service version both sides speak, NotifyRegistrationStatus), and per pod
 * NodePrepareResources before its containers start, with the claims reserved for it, and
 * NodeUnprepareResources once no pod of the node uses a claim any more. A claim's CDI device IDs go
 * to the containers that reference it (per request where the container names one); the container
 * runtime applies the CDI spec's edits.
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import {
  DRA_PLUGIN_TYPE,
  type DraClaimRef,
  type DraDevice,
  type NodePrepareResourcesResponse,
  type NodeUnprepareResourcesResponse,
  type PluginInfo,
} from '../../node-agent/kubelet/dra-protocol.js';
import {
  DraPluginV1beta1Service,
  DraPluginV1Service,
  PluginRegistrationService,
} from '../../node-agent/kubelet/dra-services.js';
import { unixTarget } from '../../node-agent/kubelet/grpc-services.js';
import { type KubeClient, type KubeObj, podPath } from '../kube-client.js';

const RPC_TIMEOUT_MS = 10_000;
const SCAN_MS = 100;

type Driver = { name: string; client: grpc.Client };
type PodClaimRef = { name: string; resourceClaimName?: string; resourceClaimTemplateName?: string };
type ContainerClaims = { name: string; resources?: { claims?: { name: string; request?: string }[] } };
type PreparedClaim = { ref: DraClaimRef; drivers: string[]; pods: Set<string> };

function unary<T>(client: grpc.Client, method: string, req: object): Promise<T> {
  const fn = (client as unknown as Record<string, CallableFunction>)[method] as (
    req: object,
    opts: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, res: T) => void,
  ) => void;
  return new Promise((resolve, reject) =>
    fn.call(client, req, { deadline: Date.now() + RPC_TIMEOUT_MS }, (err, res) => (err ? reject(err) : resolve(res))),
  );
}

function claimPath(namespace: string, name: string): string {
  return `/apis/resource.k8s.io/v1/namespaces/${namespace}/resourceclaims/${name}`;
}

/** The CDI device IDs each container gets from the pod's prepared claims (by pod-level claim name). */
export function containerCdiDevices(
  containers: readonly ContainerClaims[],
  devicesByClaim: ReadonlyMap<string, readonly DraDevice[]>,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const c of containers) {
    const ids = new Set<string>();
    for (const ref of c.resources?.claims ?? []) {
      for (const d of devicesByClaim.get(ref.name) ?? []) {
        const serves =
          !ref.request ||
          d.request_names.length === 0 ||
          d.request_names.some((r) => r === ref.request || r.startsWith(`${ref.request}/`));
        if (serves) for (const id of d.cdi_device_ids) ids.add(id);
      }
    }
    if (ids.size > 0) out.set(c.name, [...ids]);
  }
  return out;
}

export class DraManager {
  private readonly drivers = new Map<string, Driver>();
  private readonly sockets = new Set<string>();
  private readonly prepared = new Map<string, PreparedClaim>();
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> = Promise.resolve();

  private constructor(
    readonly registryDir: string,
    readonly pluginsDir: string,
    private readonly client: KubeClient,
    private readonly log: (msg: string) => void,
  ) {}

  /** `<root>/plugins_registry/` is watched; `<root>/plugins/` is where drivers keep their sockets. */
  static start(root: string, client: KubeClient, log: (msg: string) => void = () => {}): DraManager {
    const m = new DraManager(join(root, 'plugins_registry'), join(root, 'plugins'), client, log);
    mkdirSync(m.registryDir, { recursive: true });
    mkdirSync(m.pluginsDir, { recursive: true });
    m.timer = setInterval(() => void m.scan(), SCAN_MS);
    m.timer.unref();
    return m;
  }

  /** Registered driver names. */
  driverNames(): string[] {
    return [...this.drivers.keys()];
  }

  /** Looks for new registration sockets now (and waits for a scan in progress). */
  scan(): Promise<void> {
    this.scanning = this.scanning.then(() => this.scanOnce()).catch((e: Error) => this.log(`DRA: ${e.message}`));
    return this.scanning;
  }

  private async scanOnce(): Promise<void> {
    const present = new Set(readdirSync(this.registryDir).filter((f) => f.endsWith('.sock')));
    for (const s of [...this.sockets]) if (!present.has(s)) this.deregister(s);
    for (const s of present) if (!this.sockets.has(s)) await this.register(s);
  }

  private deregister(socket: string): void {
    this.sockets.delete(socket);
    for (const [name, d] of this.drivers) {
      if (`${name}-reg.sock` !== socket) continue;
      d.client.close();
      this.drivers.delete(name);
    }
  }

  private async register(socket: string): Promise<void> {
    const reg = new PluginRegistrationService(
      unixTarget(join(this.registryDir, socket)),
      grpc.credentials.createInsecure(),
    );
    try {
      const info = await unary<PluginInfo>(reg, 'GetInfo', {});
      this.sockets.add(socket);
      if (info.type !== DRA_PLUGIN_TYPE) return;
      const version = info.supported_versions.includes('v1.DRAPlugin')
        ? DraPluginV1Service
        : info.supported_versions.includes('v1beta1.DRAPlugin')
          ? DraPluginV1beta1Service
          : undefined;
      const error = version ? '' : `no supported DRAPlugin version in ${info.supported_versions.join(', ')}`;
      if (version) {
        this.drivers.get(info.name)?.client.close();
        const client = new version(unixTarget(info.endpoint), grpc.credentials.createInsecure());
        this.drivers.set(info.name, { name: info.name, client });
      }
      await unary(reg, 'NotifyRegistrationStatus', { plugin_registered: !error, error });
      this.log(error ? `DRA driver ${info.name} refused: ${error}` : `DRA driver ${info.name} registered`);
    } finally {
      reg.close();
    }
  }

  /**
   * Prepares the claims of the pod (read fresh: a template's claim name is in its status) and
   * returns the CDI device IDs of each container. Throws with the reason the pod cannot start yet.
   */
  async preparePod(pod: KubeObj): Promise<Map<string, string[]>> {
    const ns = pod.metadata.namespace as string;
    const fresh = await this.client.get(podPath(ns, pod.metadata.name));
    const spec = fresh.spec as {
      resourceClaims?: PodClaimRef[];
      containers?: ContainerClaims[];
      initContainers?: ContainerClaims[];
    };
    const statuses = (fresh.status as { resourceClaimStatuses?: { name: string; resourceClaimName?: string }[] })
      ?.resourceClaimStatuses;
    const devicesByClaim = new Map<string, DraDevice[]>();
    for (const ref of spec.resourceClaims ?? []) {
      const claimName = ref.resourceClaimName ?? statuses?.find((s) => s.name === ref.name)?.resourceClaimName;
      if (!claimName) throw new Error(`waiting for the ResourceClaim of pod claim ${ref.name} to be created`);
      devicesByClaim.set(ref.name, await this.prepareClaim(ns, claimName, fresh.metadata.uid as string));
    }
    return containerCdiDevices([...(spec.initContainers ?? []), ...(spec.containers ?? [])], devicesByClaim);
  }

  private async prepareClaim(namespace: string, name: string, podUid: string): Promise<DraDevice[]> {
    const claim = await this.client.get(claimPath(namespace, name));
    const status = claim.status as
      | { allocation?: { devices?: { results?: { driver: string }[] } }; reservedFor?: { uid: string }[] }
      | undefined;
    if (!status?.allocation) throw new Error(`ResourceClaim ${namespace}/${name} is not allocated`);
    if (!status.reservedFor?.some((r) => r.uid === podUid)) {
      throw new Error(`ResourceClaim ${namespace}/${name} is not reserved for this pod`);
    }
    const ref: DraClaimRef = { namespace, name, uid: claim.metadata.uid as string };
    const drivers = [...new Set((status.allocation.devices?.results ?? []).map((r) => r.driver))];
    const devices: DraDevice[] = [];
    for (const name of drivers) {
      const driver = this.drivers.get(name);
      if (!driver) throw new Error(`DRA driver ${name} is not registered`);
      const res = await unary<NodePrepareResourcesResponse>(driver.client, 'NodePrepareResources', { claims: [ref] });
      const answer = res.claims[ref.uid];
      if (!answer) throw new Error(`NodePrepareResources of driver ${name} has no answer for claim ${ref.uid}`);
      if (answer.error) throw new Error(`prepare dynamic resources: ${answer.error}`);
      devices.push(...answer.devices);
    }
    const entry = this.prepared.get(ref.uid) ?? { ref, drivers, pods: new Set<string>() };
    entry.pods.add(podUid);
    this.prepared.set(ref.uid, entry);
    return devices;
  }

  /** The pod ended: every claim no other pod here uses is unprepared (failures are logged, the entry kept). */
  async unpreparePod(podUid: string): Promise<void> {
    for (const [uid, entry] of this.prepared) {
      // An entry already empty is one whose unprepare failed before: tried again.
      entry.pods.delete(podUid);
      if (entry.pods.size > 0) continue;
      try {
        for (const name of entry.drivers) {
          const driver = this.drivers.get(name);
          if (!driver) throw new Error(`DRA driver ${name} is not registered`);
          const res = await unary<NodeUnprepareResourcesResponse>(driver.client, 'NodeUnprepareResources', {
            claims: [entry.ref],
          });
          const error = res.claims[uid]?.error;
          if (error) throw new Error(error);
        }
        this.prepared.delete(uid);
      } catch (e) {
        this.log(`DRA: unprepare of claim ${entry.ref.namespace}/${entry.ref.name}: ${(e as Error).message}`);
      }
    }
  }

  /** Claims prepared for pods of this node, by claim uid. */
  preparedClaims(): string[] {
    return [...this.prepared.keys()];
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.scanning;
    for (const d of this.drivers.values()) d.client.close();
    this.drivers.clear();
  }
}
