/**
 * Allocate and PreStartContainer for `vcuda-core`, tied by device IDs instead of a guess.
 *
 * Allocate names device IDs, not a pod. So it answers with what does not depend on the pod: the
 * mounts of the allocation's directory (named by its device IDs, created empty), libvcuda, and a
 * CDI device of the same name. The kubelet then records the IDs for the container and, before the
 * container starts, calls PreStartContainer with them. PreStart asks PodResources which container
 * holds exactly these IDs, verifies that pod's signed assignment and writes the container's limit
 * file, region and CDI spec (its cards) into place. Any doubt refuses the container, naming the
 * pods. No node lock and no pending rule: identical pods start in parallel.
 *
 * Whole MIG instances (one plugin per profile, devices = the instances) take the same path: the
 * device IDs the kubelet picked tie the container, and the signed grant decides which instances
 * it gets; their CDI spec carries the instances' device nodes, and no limit file caps them.
 */
import {
  AssignmentError,
  type ContainerGrant,
  type DeviceLimit,
  eventReasons,
  messageOf,
  migResourceName,
  type ResourceNames,
  type VerifiedAssignment,
  vcudaAnnotations,
  verifyAssignment,
} from '../../contract/index.js';
import type { AgentLog } from '../agent-log.js';
import type { ContainerAllocateResponse, ListPodResourcesResponse } from '../kubelet/protocol.js';
import { buildAllocateResponse, buildMigAllocateResponse, type ResponseSettings } from '../limits/allocate-response.js';
import { removeCdiSpec, writeCdiSpec, writeMigCdiSpec } from '../limits/cdi-spec.js';
import {
  allocationKey,
  type ContainerPaths,
  containerPaths,
  resetAllocationDir,
  writeContainerFiles,
} from '../limits/container-files.js';
import { AllocationError, type AllocationErrorCode } from './allocation-error.js';
import { coreGroupOfDevice } from './core-devices.js';
import { deviceLimitOf, grantCore } from './grant-limits.js';
import { type HolderResult, resolveHolder } from './holder.js';
import { migHandover } from './mig-handover.js';
import { SharedPodResources } from './pod-resources-ties.js';
import type { GpuContainerView, PodView } from './pod-view.js';
import { podKey } from './pod-view.js';
import type {
  CardDirectory,
  CardRef,
  ContainerRecord,
  DynamicMigMaker,
  EventRecorder,
  JwksSource,
  MigDirectory,
  PodAnnotator,
  PodResourcesLister,
  PodSource,
} from './ports.js';
import { relearnContainers } from './relearn.js';
import { migSteeringHint, steeringHint } from './steering.js';

export type AllocatorDeps = {
  nodeName: string;
  names: ResourceNames;
  containersDir: string;
  /** Where the container runtime reads CDI specs (`/var/run/cdi`). */
  cdiSpecDir: string;
  response: ResponseSettings;
  pods: PodSource;
  podResources: PodResourcesLister;
  annotator: PodAnnotator;
  events: EventRecorder;
  jwks: JwksSource;
  cards: CardDirectory;
  /** The node's whole MIG instances; absent: the node serves none. */
  mig?: MigDirectory;
  /** Makes the instances of dynamic MIG grants; absent: the node keeps no card for dynamic MIG. */
  dynamicMig?: DynamicMigMaker;
  nowMs: () => number;
  log: Pick<AgentLog, 'info' | 'warn'>;
  /** Delay between retries of the allocated-at annotation (default: 1 s doubling). */
  retryDelayMs?: number;
};

/** Whether a container asks the devices of an Allocate, and that in words for refusals (`10 core`). */
type Asks = { matches: (c: GpuContainerView) => boolean; words: string };

function migAsks(profile: string, count: number): Asks['matches'] {
  return (c) => c.mig?.profile === profile && c.mig.count === count;
}

/** An Allocate's time is kept this long for its PreStart (the assignment's expiry counts at Allocate). */
const ALLOCATE_MEMORY_MS = 3_600_000;

export class Allocator {
  private readonly recordList: ContainerRecord[] = [];
  /** Allocation key → when the kubelet called Allocate for it. */
  private readonly allocatedAt = new Map<string, number>();
  private readonly marked = new Set<string>();
  private readonly podResources: SharedPodResources;

  constructor(private readonly d: AllocatorDeps) {
    this.podResources = new SharedPodResources(d.podResources);
  }

  records(): readonly ContainerRecord[] {
    return this.recordList;
  }

  /** Forgets pods that are gone (housekeeping), and Allocates whose PreStart never came. */
  forgetPods(isGone: (podUid: string) => boolean): void {
    for (const uid of [...this.marked]) if (isGone(uid)) this.marked.delete(uid);
    for (let i = this.recordList.length - 1; i >= 0; i--) {
      if (isGone((this.recordList[i] as ContainerRecord).podUid)) this.recordList.splice(i, 1);
    }
    const oldest = this.d.nowMs() - ALLOCATE_MEMORY_MS;
    for (const [key, at] of [...this.allocatedAt]) if (at < oldest) this.allocatedAt.delete(key);
  }

  /** Allocation keys still in use by a known container (housekeeping keeps their files). */
  liveKeys(): Set<string> {
    return new Set(this.recordList.map((r) => r.paths.key));
  }

  private isStarted(podUid: string, container: string): boolean {
    return this.recordList.some((r) => r.podUid === podUid && r.container === container);
  }

  /** For GetPreferredAllocation: the cards (core group → core) every waiting container of this size wants. */
  grantedCoresPerCard(coreDevices: number): Map<string, number> {
    return steeringHint({
      coreDevices,
      nodeName: this.d.nodeName,
      pods: this.d.pods.pods(),
      isStarted: (uid, c) => this.isStarted(uid, c),
      coreGroup: (uuid) => {
        const card = this.d.cards.cardByUuid(uuid);
        return card && (card.migShare?.coreGroup ?? String(card.index));
      },
    });
  }

  /** For GetPreferredAllocation of a MIG profile: the instances every waiting container of this size wants. */
  grantedMigDevices(profile: string, count: number): string[] {
    return migSteeringHint({
      profile,
      count,
      nodeName: this.d.nodeName,
      pods: this.d.pods.pods(),
      isStarted: (uid, c) => this.isStarted(uid, c),
    });
  }

  /** Answers with what does not depend on the pod; PreStartContainer fills the directory in. */
  async allocate(deviceIds: string[]): Promise<ContainerAllocateResponse> {
    const foreign = deviceIds.filter((id) => coreGroupOfDevice(id) === undefined);
    if (foreign.length > 0 || deviceIds.length === 0) {
      throw new AllocationError(
        'foreign-devices',
        `Allocate names devices that are not vcuda-core: ${foreign.join(', ') || '(none)'}`,
      );
    }
    const core = deviceIds.length;
    await this.requireAssignedCandidate({ matches: (c) => c.core === core, words: `${core} ${this.d.names.core}` });
    const paths = containerPaths(this.d.containersDir, allocationKey(deviceIds));
    // The kubelet hands these devices to a new container: whatever an earlier holder left goes.
    this.dropRecord(paths.key);
    removeCdiSpec(this.d.cdiSpecDir, paths.key);
    resetAllocationDir(paths);
    this.allocatedAt.set(paths.key, this.d.nowMs());
    return buildAllocateResponse(paths, this.d.response);
  }

  /** Allocate for whole MIG instances of `profile`: the same checks; the answer mounts no libvcuda. */
  async allocateMig(profile: string, deviceIds: string[]): Promise<ContainerAllocateResponse> {
    const resource = migResourceName(this.d.names, profile);
    const foreign = deviceIds.filter((id) => !this.d.mig?.isDeviceOf(id, profile));
    if (foreign.length > 0 || deviceIds.length === 0) {
      throw new AllocationError(
        'foreign-devices',
        `Allocate names devices that are not ${resource}: ${foreign.join(', ') || '(none)'}`,
      );
    }
    const count = deviceIds.length;
    await this.requireAssignedCandidate({ matches: migAsks(profile, count), words: `${count} ${resource}` });
    const paths = containerPaths(this.d.containersDir, allocationKey(deviceIds));
    this.dropRecord(paths.key);
    removeCdiSpec(this.d.cdiSpecDir, paths.key);
    // Nothing goes in it; it exists so housekeeping removes the spec with it once no container holds it.
    resetAllocationDir(paths);
    this.allocatedAt.set(paths.key, this.d.nowMs());
    return buildMigAllocateResponse(paths, this.d.response);
  }

  /**
   * Refuses an Allocate no pod here could be the holder of: no unfinished pod bound to this node
   * has a GPU container asking exactly this many core with an assignment that verifies. Such a
   * pod skipped vcuda's scheduling (its `spec.nodeName` set by hand, admission exempt or down):
   * the kubelet then fails it at admission (UnexpectedAdmissionError), so it holds no devices, and
   * kube-scheduler no capacity, that the ledger does not know of. Which pod it is stays
   * PreStartContainer's question; this only asks whether any could be.
   */
  private async requireAssignedCandidate(asks: Asks): Promise<void> {
    let jwks: Awaited<ReturnType<JwksSource>>;
    try {
      jwks = await this.d.jwks();
    } catch {
      // Without the keys nothing verifies; PreStartContainer refuses and says which file is wrong.
      return;
    }
    const nowMs = this.d.nowMs();
    /** The unfinished pods here that could hold `core` devices; `assigned` when one verifies. */
    const candidates = async () => {
      const pods: PodView[] = [];
      for (const pod of this.d.pods.pods()) {
        if (pod.nodeName !== this.d.nodeName || pod.isFinished) continue;
        if (!pod.gpuContainers.some(asks.matches)) continue;
        const token = pod.annotations[vcudaAnnotations.assignment];
        const verified =
          token !== undefined &&
          (await verifyAssignment(token, jwks, {
            podUid: pod.uid,
            node: this.d.nodeName,
            nowSeconds: Math.floor(nowMs / 1000),
          })
            .then(() => true)
            .catch(() => false));
        if (verified) return { assigned: true, pods };
        pods.push(pod);
      }
      return { assigned: false, pods };
    };
    let found = await candidates();
    // The watch may not have brought the pod yet: once more on a fresh list before refusing.
    if (!found.assigned) {
      await this.d.pods.refresh();
      found = await candidates();
    }
    if (found.assigned) return;
    // One pod could be the holder: refuse with its own reason (and its Event), as PreStart would.
    if (found.pods.length === 1) await this.verify(found.pods[0] as PodView, nowMs);
    const message =
      `no pod bound to node ${this.d.nodeName} asks ${asks.words} with a verified assignment` +
      (found.pods.length > 0 ? ` (unverified: ${found.pods.map(podKey).join(', ')})` : '') +
      ': a GPU pod must be placed by vcuda (its spec.nodeName set by hand, or admission skipped, gives it no cards)';
    this.d.log.warn({ asks: asks.words }, `Allocate refused: ${message}`);
    throw new AllocationError('no-assigned-pod', message);
  }

  private dropRecord(key: string): ContainerRecord | undefined {
    const i = this.recordList.findIndex((r) => r.paths.key === key);
    return i < 0 ? undefined : this.recordList.splice(i, 1)[0];
  }

  private refuse(pod: PodView, code: AllocationErrorCode, detail: string, cause?: unknown): never {
    const message = `pod ${podKey(pod)}: ${detail}`;
    this.d.events.podEvent(pod, eventReasons.allocateFailed, message);
    this.d.log.warn({ pod: podKey(pod), code }, `PreStartContainer refused: ${message}`);
    throw new AllocationError(code, message, { cause });
  }

  private async verify(pod: PodView, atMs: number): Promise<VerifiedAssignment> {
    const token = pod.annotations[vcudaAnnotations.assignment];
    if (!token) {
      return this.refuse(pod, 'unsigned', `has no signed assignment (${vcudaAnnotations.assignment}); refusing it`);
    }
    let jwks: Awaited<ReturnType<JwksSource>>;
    try {
      jwks = await this.d.jwks();
    } catch (err) {
      // Without the keys nothing can be verified: fail closed, and say which file is wrong.
      return this.refuse(pod, 'no-jwks', `cannot read the verification keys: ${messageOf(err)}`, err);
    }
    try {
      return await verifyAssignment(token, jwks, {
        podUid: pod.uid,
        node: this.d.nodeName,
        // Expiry counts when the kubelet admitted the pod (Allocate), not after a long image pull.
        nowSeconds: Math.floor(atMs / 1000),
        ignoreExpiry: false,
      });
    } catch (err) {
      if (err instanceof AssignmentError) return this.refuse(pod, err.code, `${err.message}; refusing it`, err);
      throw err;
    }
  }

  private deviceLimits(pod: PodView, grant: ContainerGrant): DeviceLimit[] {
    return grant.cards.map((g) => {
      const card = this.d.cards.cardByUuid(g.uuid);
      if (!card)
        return this.refuse(pod, 'unknown-card', `assignment names card ${g.uuid}, not on node ${this.d.nodeName}`);
      if (!card.healthy) {
        return this.refuse(pod, 'unhealthy-card', `card ${g.uuid} is unhealthy (${card.healthReason ?? 'unknown'})`);
      }
      if (card.migShare && !card.migShare.capMinors) {
        return this.refuse(pod, 'unknown-card', `the driver lists no access nodes for shared MIG instance ${g.uuid}`);
      }
      return deviceLimitOf(g, grant, card.index);
    });
  }

  /** The holder of these devices by PodResources; a shared List first, a fresh one before refusing. */
  private async holderOf(resource: string, deviceIds: string[], asks: Asks): Promise<HolderResult> {
    const resolve = (listed: ListPodResourcesResponse) =>
      resolveHolder({
        listed,
        resource,
        deviceIds,
        nodeName: this.d.nodeName,
        initContainersOf: (ns, name) => this.podNamed(ns, name)?.gpuContainers.filter((c) => c.isInit),
        asks,
      });
    const first = resolve(await this.podResources.shared());
    if (first.ok) return first;
    // A shared List may predate the kubelet recording this container: decide on a fresh one.
    await this.d.pods.refresh();
    return resolve(await this.podResources.fresh());
  }

  private podNamed(namespace: string, name: string): PodView | undefined {
    return this.d.pods.pods().find((p) => p.namespace === namespace && p.name === name);
  }

  private refuseUnresolved(result: Extract<HolderResult, { ok: false }>): never {
    const waiting = this.waitingPods();
    const message =
      result.code === 'no-holder' && result.pods.length === 0 && waiting.length > 0
        ? `${result.message}; pods waiting for a vcuda container here: ${waiting.map(podKey).join(', ')}`
        : result.message;
    for (const p of result.pods) {
      const pod = this.podNamed(p.namespace, p.name);
      if (pod) this.d.events.podEvent(pod, eventReasons.allocateFailed, message);
    }
    this.d.log.warn({ code: result.code }, message);
    throw new AllocationError(result.code, message);
  }

  private waitingPods(): PodView[] {
    return this.d.pods
      .pods()
      .filter((p) => p.nodeName === this.d.nodeName && !p.isFinished && !this.marked.has(p.uid))
      .filter((p) => p.gpuContainers.some((c) => !this.isStarted(p.uid, c.name)))
      .sort((a, b) => podKey(a).localeCompare(podKey(b)));
  }

  /**
   * The container the kubelet recorded these devices for, its pod bound here; undefined when it is
   * already tied to them (a container restart, or an app container whose devices its init container had).
   */
  private async holdingContainer(
    resource: string,
    deviceIds: string[],
    asks: Asks,
    paths: ContainerPaths,
  ): Promise<{ pod: PodView; container: GpuContainerView; handedOver: boolean } | undefined> {
    const holder = await this.holderOf(resource, deviceIds, asks);
    if (!holder.ok) return this.refuseUnresolved(holder);
    if (!this.podNamed(holder.namespace, holder.name)) await this.d.pods.refresh();
    const pod = this.podNamed(holder.namespace, holder.name);
    if (!pod || pod.nodeName !== this.d.nodeName) {
      const message = `PreStartContainer: the kubelet reports devices of this allocation on ${holder.namespace}/${holder.name}, which is not a pod bound to node ${this.d.nodeName}; refusing it`;
      throw new AllocationError('no-holder', message);
    }
    const known = this.recordList.find((r) => r.paths.key === paths.key);
    if (known && known.podUid === pod.uid && known.container === holder.container) return undefined;
    const container = pod.gpuContainers.find((c) => c.name === holder.container);
    if (!container) {
      return this.refuse(
        pod,
        'not-gpu-container',
        `container ${holder.container} asks no ${resource} but holds its devices`,
      );
    }
    return { pod, container, handedOver: known !== undefined };
  }

  /** Ties the devices to the container the kubelet recorded them for and writes its files. */
  async preStart(deviceIds: string[]): Promise<void> {
    const paths = containerPaths(this.d.containersDir, allocationKey(deviceIds));
    const core = deviceIds.length;
    const asks = { matches: (c: GpuContainerView) => c.core === core, words: `${core} core` };
    const held = await this.holdingContainer(this.d.names.core, deviceIds, asks, paths);
    if (held) await this.tie(held.pod, held.container, deviceIds, paths, held.handedOver);
  }

  /**
   * PreStartContainer for whole MIG instances of `profile`: ties the devices as for vcuda-core, then
   * hands over the instances the signed grant names (which may not be the device IDs the kubelet
   * picked: the grant decides), by their CDI spec: parents, access nodes, `MIG-` UUIDs.
   */
  async preStartMig(profile: string, deviceIds: string[]): Promise<void> {
    const resource = migResourceName(this.d.names, profile);
    const paths = containerPaths(this.d.containersDir, allocationKey(deviceIds));
    const count = deviceIds.length;
    const held = await this.holdingContainer(
      resource,
      deviceIds,
      { matches: migAsks(profile, count), words: `${count} ${resource}` },
      paths,
    );
    if (!held) return;
    const { pod, container } = held;
    if (container.mig?.profile !== profile || container.mig.count !== count) {
      const asked = container.mig
        ? `${container.mig.count} ${migResourceName(this.d.names, container.mig.profile)}`
        : `${container.core} core`;
      return this.refuse(
        pod,
        'grant-mismatch',
        `container ${container.name} asks ${asked} but holds ${count} ${resource}`,
      );
    }
    const assignment = await this.verify(pod, this.allocatedAt.get(paths.key) ?? this.d.nowMs());
    const grant = assignment.containers.find((c) => c.name === container.name && c.isInit === container.isInit);
    if (!grant) return this.refuse(pod, 'no-grant', `signed assignment has no grant for container ${container.name}`);
    const made = this.makeDynamicInstances(pod, grant);
    const handover = migHandover({ grant: made, profile, count, mig: this.d.mig, nodeName: this.d.nodeName });
    if (!handover.ok) return this.refuse(pod, handover.code, handover.detail);
    const devices = handover.devices;
    writeMigCdiSpec(this.d.cdiSpecDir, paths.key, devices, this.d.response);
    this.record(
      pod,
      container,
      deviceIds,
      paths,
      [],
      devices.map((d) => d.uuid),
    );
    await this.markIfAllTied(pod);
  }

  /**
   * The grant with each dynamic placement turned into the instance made (or adopted) for it, so
   * the handover checks and hands over a real `MIG-` UUID; refuses naming the placement when the
   * instance cannot be made (the kubelet calls PreStart again after its backoff).
   */
  private makeDynamicInstances(pod: PodView, grant: ContainerGrant): ContainerGrant {
    if (!grant.cards.some((g) => g.mig?.dynamic)) return grant;
    const maker = this.d.dynamicMig;
    const cards = grant.cards.map((g) => {
      if (!g.mig?.dynamic) return g;
      if (!maker) {
        return this.refuse(
          pod,
          'unknown-card',
          `assignment names dynamic MIG ${g.uuid}; node ${this.d.nodeName} keeps no card for dynamic MIG`,
        );
      }
      try {
        return { ...g, uuid: maker.ensure(g, pod.uid) };
      } catch (err) {
        return this.refuse(pod, 'mig-not-made', `MIG instance ${g.uuid} not made: ${messageOf(err)}`, err);
      }
    });
    return { ...grant, cards };
  }

  private async tie(
    pod: PodView,
    container: GpuContainerView,
    deviceIds: string[],
    paths: ContainerPaths,
    handedOver: boolean,
  ): Promise<void> {
    if (container.core !== deviceIds.length) {
      return this.refuse(
        pod,
        'grant-mismatch',
        `container ${container.name} asks ${container.core} core but holds ${deviceIds.length} devices`,
      );
    }
    const assignment = await this.verify(pod, this.allocatedAt.get(paths.key) ?? this.d.nowMs());
    const grant = assignment.containers.find((c) => c.name === container.name && c.isInit === container.isInit);
    if (!grant) return this.refuse(pod, 'no-grant', `signed assignment has no grant for container ${container.name}`);
    if (grantCore(grant) !== container.core) {
      return this.refuse(
        pod,
        'grant-mismatch',
        `container ${container.name} asks ${container.core} core but its signed grant is ${grantCore(grant)}`,
      );
    }
    const devices = this.deviceLimits(pod, grant);
    writeContainerFiles({
      paths,
      podUid: pod.uid,
      container: container.name,
      devices,
      nowMs: this.d.nowMs(),
      freshRegion: handedOver,
    });
    const cards = grant.cards.map((g) => {
      const card = this.d.cards.cardByUuid(g.uuid) as CardRef;
      return { uuid: card.uuid, minorNumber: card.minorNumber, capMinors: card.migShare?.capMinors };
    });
    writeCdiSpec(this.d.cdiSpecDir, paths.key, cards, this.d.response);
    this.record(pod, container, deviceIds, paths, devices);
    await this.markIfAllTied(pod);
  }

  /** Keeps the tie of a container to its devices (replacing an earlier holder's). */
  private record(
    pod: PodView,
    container: GpuContainerView,
    deviceIds: string[],
    paths: ContainerPaths,
    devices: DeviceLimit[],
    migDevices?: string[],
  ): void {
    this.dropRecord(paths.key);
    this.allocatedAt.delete(paths.key);
    this.recordList.push({
      podUid: pod.uid,
      namespace: pod.namespace,
      podName: pod.name,
      container: container.name,
      isInit: container.isInit,
      deviceIds: [...deviceIds],
      devices,
      ...(migDevices ? { migDevices } : {}),
      paths,
      allocatedAtMs: this.d.nowMs(),
      confirmed: true,
    });
  }

  /** Marks the pod allocated once every app GPU container of it (cards and MIG instances) is tied. */
  private async markIfAllTied(pod: PodView): Promise<void> {
    const appsDone = pod.gpuContainers.filter((c) => !c.isInit).every((c) => this.isStarted(pod.uid, c.name));
    if (appsDone && !this.marked.has(pod.uid)) await this.markAllocated(pod, this.d.nowMs());
  }

  /** Tells the control plane (and `kubectl describe`) that the pod's GPU containers are tied. */
  private async markAllocated(pod: PodView, nowMs: number): Promise<void> {
    this.marked.add(pod.uid);
    const cards = this.recordList
      .filter((r) => r.podUid === pod.uid)
      .flatMap((r) => [...r.devices.map((d) => d.uuid), ...(r.migDevices ?? [])]);
    const annotations = { [vcudaAnnotations.allocatedAt]: new Date(nowMs).toISOString() };
    const write = () => this.d.annotator.annotatePod(pod.namespace, pod.name, annotations);
    try {
      await write();
    } catch (err) {
      // The containers have what they need, so PreStart succeeds; keep trying in the background.
      this.d.log.warn(
        { err, pod: podKey(pod) },
        `pod ${podKey(pod)}: writing ${vcudaAnnotations.allocatedAt} failed; retrying`,
      );
      void this.retryAnnotation(pod, write, 1);
    }
    this.d.events.podEvent(pod, eventReasons.allocated, `allocated on node ${this.d.nodeName}: ${cards.join(', ')}`);
  }

  private async retryAnnotation(pod: PodView, write: () => Promise<void>, attempt: number): Promise<void> {
    await new Promise((r) => setTimeout(r, this.d.retryDelayMs ?? 500 * 2 ** attempt).unref());
    try {
      await write();
    } catch (err) {
      if (attempt >= 5) {
        this.d.log.warn({ err, pod: podKey(pod) }, `pod ${podKey(pod)}: giving up on ${vcudaAnnotations.allocatedAt}`);
        return;
      }
      await this.retryAnnotation(pod, write, attempt + 1);
    }
  }

  /**
   * After a restart: re-learn running containers from PodResources and their pods' assignments
   * (signature still checked, expiry waived), so PreStart, metrics and housekeeping see them.
   */
  async rebuild(): Promise<number> {
    const learned = await relearnContainers({
      ...this.d,
      listPodResources: () => this.podResources.fresh(),
      isKnown: (key) => this.recordList.some((r) => r.paths.key === key),
      ...(this.d.dynamicMig ? { migUuidOf: (key: string) => this.d.dynamicMig?.uuidOf(key) } : {}),
    });
    for (const record of learned) {
      this.recordList.push(record);
      this.marked.add(record.podUid);
    }
    return learned.length;
  }
}
