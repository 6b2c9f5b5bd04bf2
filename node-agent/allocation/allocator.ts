/**
 * Allocate and PreStartContainer for `vcuda-core`: match the call to one pending pod's container,
 * verify that pod's signed assignment, write the container's files and answer with what it gets.
 * No node lock: the match and the claim happen in one synchronous step, everything after works on
 * the claimed container only. Refusals throw AllocationError; the kubelet shows the message.
 */
import {
  AssignmentError,
  type ContainerGrant,
  type DeviceLimit,
  eventReasons,
  peekAssignment,
  type ResourceNames,
  type VerifiedAssignment,
  vcudaAnnotations,
  verifyAssignment,
} from '../../contract/index.js';
import { cardOfCoreDevice } from '../device-plugin/device-list.js';
import type { ContainerAllocateResponse } from '../device-plugin/protocol.js';
import { buildAllocateResponse, type ResponseSettings } from '../limits/allocate-response.js';
import { type ContainerPaths, writeContainerFiles } from '../limits/container-files.js';
import { AllocationError, type AllocationErrorCode } from './allocation-error.js';
import { deviceLimitOf, grantCore } from './grant-limits.js';
import { type MatchResult, matchAllocate, nextContainer } from './match.js';
import { type DeviceOwner, ownersOf, SharedPodResources, sameSet } from './pod-resources-ties.js';
import type { GpuContainerView, PodView } from './pod-view.js';
import { podKey } from './pod-view.js';
import type { EventRecorder, JwksSource, PodAnnotator, PodResourcesLister, PodSource } from './ports.js';
import { relearnContainers } from './relearn.js';

export type CardRef = { uuid: string; index: number; minorNumber: number; healthy: boolean; healthReason?: string };

export interface CardDirectory {
  cardByUuid(uuid: string): CardRef | undefined;
}

/** One container this agent allocated (or re-learned after a restart). */
export type ContainerRecord = {
  podUid: string;
  namespace: string;
  podName: string;
  container: string;
  isInit: boolean;
  deviceIds: string[];
  devices: DeviceLimit[];
  paths: ContainerPaths;
  allocatedAtMs: number;
  confirmed: boolean;
};

export type AllocatorDeps = {
  nodeName: string;
  names: ResourceNames;
  containersDir: string;
  response: ResponseSettings;
  pods: PodSource;
  podResources: PodResourcesLister;
  annotator: PodAnnotator;
  events: EventRecorder;
  jwks: JwksSource;
  cards: CardDirectory;
  nowMs: () => number;
  log: { info: (m: string) => void; warn: (m: string) => void };
  /** Delay between retries of the allocated-at annotation (default: 1 s doubling). */
  retryDelayMs?: number;
};

export class Allocator {
  private readonly progress = new Map<string, Set<string>>();
  private readonly refused = new Set<string>();
  private readonly recordList: ContainerRecord[] = [];
  private readonly podResources: SharedPodResources;

  constructor(private readonly d: AllocatorDeps) {
    this.podResources = new SharedPodResources(d.podResources);
  }

  records(): readonly ContainerRecord[] {
    return this.recordList;
  }

  /** Forgets pods that are gone (housekeeping). */
  forgetPods(isGone: (podUid: string) => boolean): void {
    for (const uid of [...this.progress.keys()]) if (isGone(uid)) this.progress.delete(uid);
    for (const uid of [...this.refused]) if (isGone(uid)) this.refused.delete(uid);
    for (let i = this.recordList.length - 1; i >= 0; i--) {
      if (isGone((this.recordList[i] as ContainerRecord).podUid)) this.recordList.splice(i, 1);
    }
  }

  private claim(pod: PodView, container: GpuContainerView): void {
    const done = this.progress.get(pod.uid) ?? new Set<string>();
    this.progress.set(pod.uid, done);
    done.add(container.name);
  }

  /** The pending container of this size, against the pods as listed now and the claims so far. */
  private match(coreDevices: number): MatchResult {
    return matchAllocate({
      coreDevices,
      nodeName: this.d.nodeName,
      pods: this.d.pods.pods(),
      progress: this.progress,
      refused: this.refused,
    });
  }

  /** Match and claim in one synchronous step, re-listing once before giving up. */
  private async matchAndClaim(coreDevices: number): Promise<{ pod: PodView; container: GpuContainerView }> {
    for (let attempt = 0; ; attempt++) {
      const m = this.match(coreDevices);
      if (m.ok) {
        this.claim(m.pod, m.container);
        return m;
      }
      if (attempt > 0) {
        for (const p of m.candidates) this.d.events.podEvent(p, eventReasons.allocateFailed, m.message);
        throw new AllocationError(m.reason, m.message);
      }
      await this.d.pods.refresh();
    }
  }

  private refuse(pod: PodView, code: AllocationErrorCode, detail: string, cause?: unknown): never {
    this.refused.add(pod.uid);
    const message = `pod ${podKey(pod)}: ${detail}`;
    this.d.events.podEvent(pod, eventReasons.allocateFailed, message);
    this.d.log.warn(`allocate refused: ${message}`);
    throw new AllocationError(code, message, { cause });
  }

  private async verify(pod: PodView): Promise<VerifiedAssignment> {
    const token = pod.annotations[vcudaAnnotations.assignment];
    if (!token) {
      return this.refuse(pod, 'unsigned', `has no signed assignment (${vcudaAnnotations.assignment}); refusing it`);
    }
    let jwks: Awaited<ReturnType<JwksSource>>;
    try {
      jwks = await this.d.jwks();
    } catch (err) {
      // Without the keys nothing can be verified: fail closed, and say which file is wrong.
      return this.refuse(pod, 'no-jwks', `cannot read the verification keys: ${(err as Error).message}`, err);
    }
    try {
      return await verifyAssignment(token, jwks, {
        podUid: pod.uid,
        node: this.d.nodeName,
        nowSeconds: Math.floor(this.d.nowMs() / 1000),
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
      return deviceLimitOf(g, grant, card.index);
    });
  }

  /**
   * For GetPreferredAllocation: the cards (index → core) of the one pending container of this size,
   * read without verifying or claiming anything; empty when there is not exactly one.
   */
  grantedCoresPerCard(coreDevices: number): Map<number, number> {
    const out = new Map<number, number>();
    const m = this.match(coreDevices);
    if (!m.ok) return out;
    const token = m.pod.annotations[vcudaAnnotations.assignment];
    const grant = token
      ? peekAssignment(token)?.containers.find((c) => c.name === m.container.name && c.isInit === m.container.isInit)
      : undefined;
    for (const g of grant?.cards ?? []) {
      const card = this.d.cards.cardByUuid(g.uuid);
      if (card) out.set(card.index, g.core);
    }
    return out;
  }

  async allocate(deviceIds: string[]): Promise<ContainerAllocateResponse> {
    const foreign = deviceIds.filter((id) => cardOfCoreDevice(id) === undefined);
    if (foreign.length > 0 || deviceIds.length === 0) {
      throw new AllocationError(
        'foreign-devices',
        `Allocate names devices that are not vcuda-core: ${foreign.join(', ')}`,
      );
    }
    const { pod, container } = await this.matchAndClaim(deviceIds.length);
    const assignment = await this.verify(pod);
    const grant = assignment.containers.find((c) => c.name === container.name && c.isInit === container.isInit);
    if (!grant) {
      return this.refuse(pod, 'no-grant', `signed assignment has no grant for container ${container.name}`);
    }
    if (grantCore(grant) !== container.core) {
      return this.refuse(
        pod,
        'grant-mismatch',
        `container ${container.name} asks ${container.core} core but its signed grant is ${grantCore(grant)}`,
      );
    }
    const devices = this.deviceLimits(pod, grant);
    const nowMs = this.d.nowMs();
    const paths = writeContainerFiles({
      containersDir: this.d.containersDir,
      podUid: pod.uid,
      container: container.name,
      devices,
      nowMs,
    });
    this.recordList.push({
      podUid: pod.uid,
      namespace: pod.namespace,
      podName: pod.name,
      container: container.name,
      isInit: container.isInit,
      deviceIds: [...deviceIds],
      devices,
      paths,
      allocatedAtMs: nowMs,
      confirmed: false,
    });
    const cards = grant.cards.map((g) => this.d.cards.cardByUuid(g.uuid) as CardRef);
    const response = buildAllocateResponse(cards, paths, this.d.response);
    if (nextContainer(pod, this.progress) === undefined) await this.markAllocated(pod, nowMs);
    return response;
  }

  /** Ends the pod's pending state so the extender may place the next pod of its shape here. */
  private async markAllocated(pod: PodView, nowMs: number): Promise<void> {
    const cards = this.recordList.filter((r) => r.podUid === pod.uid).flatMap((r) => r.devices.map((d) => d.uuid));
    const annotations = { [vcudaAnnotations.allocatedAt]: new Date(nowMs).toISOString() };
    const write = () => this.d.annotator.annotatePod(pod.namespace, pod.name, annotations);
    try {
      await write();
    } catch (err) {
      // The containers have what they need, so Allocate succeeds; until the annotation lands the
      // extender holds this node's next pod of the shape, so keep trying in the background.
      this.d.log.warn(`pod ${podKey(pod)}: writing ${vcudaAnnotations.allocatedAt} failed: ${(err as Error).message}`);
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
        this.d.log.warn(`pod ${podKey(pod)}: giving up on ${vcudaAnnotations.allocatedAt}: ${(err as Error).message}`);
        return;
      }
      await this.retryAnnotation(pod, write, attempt + 1);
    }
  }

  /** Confirms through the kubelet's PodResources that these devices went to the container we tied them to. */
  async preStart(deviceIds: string[]): Promise<void> {
    const candidates = this.recordList.filter((r) => sameSet(r.deviceIds, deviceIds));
    const ids = [...deviceIds].sort().join(',');
    if (candidates.length === 0) {
      throw new AllocationError(
        'tie-unconfirmed',
        `PreStartContainer: no vcuda allocation holds devices [${ids}] on node ${this.d.nodeName}; refusing to start`,
      );
    }
    const confirmed = (owners: DeviceOwner[]) =>
      candidates.find((r) =>
        owners.some((o) => o.namespace === r.namespace && o.name === r.podName && o.container === r.container),
      );
    let owners = ownersOf(await this.podResources.shared(), this.d.names.core, deviceIds);
    let record = confirmed(owners);
    if (!record) {
      // A shared List may predate the kubelet recording this container: decide on a fresh one.
      owners = ownersOf(await this.podResources.fresh(), this.d.names.core, deviceIds);
      record = confirmed(owners);
    }
    if (record) {
      record.confirmed = true;
      return;
    }
    const ours = candidates.map((r) => `${r.namespace}/${r.podName} container ${r.container}`).join('; ');
    const theirs = owners.map((o) => `${o.namespace}/${o.name} container ${o.container}`).join('; ') || 'no container';
    const message =
      `PreStartContainer: devices [${ids}] were tied by vcuda to ${ours}, but the kubelet reports them on ${theirs}; ` +
      "refusing to start a container with another pod's cards";
    for (const r of candidates) {
      this.d.events.podEvent(
        { namespace: r.namespace, name: r.podName, uid: r.podUid },
        eventReasons.allocateFailed,
        message,
      );
    }
    throw new AllocationError('tie-mismatch', message);
  }

  /**
   * After a restart: re-learn running containers from PodResources and their pods' assignments
   * (signature still checked, expiry waived), so PreStart, metrics and housekeeping see them.
   */
  async rebuild(): Promise<number> {
    const learned = await relearnContainers({
      ...this.d,
      listPodResources: () => this.podResources.fresh(),
      isKnown: (podUid, container) => this.recordList.some((r) => r.podUid === podUid && r.container === container),
    });
    for (const { pod, container, record } of learned) {
      this.claim(pod, container);
      this.recordList.push(record);
    }
    return learned.length;
  }
}
