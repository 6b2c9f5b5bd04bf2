/**
 * The agent's Kubernetes API adapters (thin: they only translate): a watch cache of the pods on
 * this node, pod annotations and events, Node annotations and capacity, and the JWKS file.
 */
import { readFileSync, statSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import type { JSONWebKeySet } from 'jose';
import { type EventReason, messageOf, type PodEvent, type ResourceNames, VcudaError } from '../contract/index.js';
import { createEventRecorder, type PodEventRecorder } from '../kube-connections/event-recorder.js';
import type { NodeCapacityPatcher } from './agent.js';
import type { AgentLog } from './agent-log.js';
import { type PodObject, type PodView, toPodView } from './allocation/pod-view.js';
import type { EventRecorder, JwksSource, PodAnnotator, PodSource } from './allocation/ports.js';
import type { NodePatcher } from './inventory.js';

const COMPONENT = 'vcuda-node-agent';
const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

type Log = Pick<AgentLog, 'warn'>;

/**
 * Pods with `spec.nodeName` = this node: listed once, then kept current by a watch that relists on
 * end. Each pod is translated to its view once, when it arrives: the allocator reads every pod of
 * the node at each steering hint and PreStart, which must not translate them all again each time.
 */
export class PodWatchCache implements PodSource {
  private readonly byUid = new Map<string, PodView>();
  private abort: AbortController | undefined;
  private stopped = false;
  private readonly api: k8s.CoreV1Api;

  constructor(
    private readonly kc: k8s.KubeConfig,
    private readonly nodeName: string,
    private readonly names: ResourceNames,
    private readonly log: Log,
  ) {
    this.api = kc.makeApiClient(k8s.CoreV1Api);
  }

  private get fieldSelector(): string {
    return `spec.nodeName=${this.nodeName}`;
  }

  pods(): PodView[] {
    return [...this.byUid.values()];
  }

  isShown(podUid: string): boolean {
    return this.byUid.has(podUid);
  }

  /** Lists and returns the list's resourceVersion, replacing the cache. */
  private async list(): Promise<string> {
    const res = await this.api.listPodForAllNamespaces({ fieldSelector: this.fieldSelector });
    const before = new Map(this.byUid);
    this.byUid.clear();
    for (const p of res.items) {
      const uid = p.metadata?.uid;
      if (uid) this.byUid.set(uid, toPodView(p as PodObject, this.names, before.get(uid)));
    }
    return res.metadata?.resourceVersion ?? '';
  }

  async refresh(): Promise<void> {
    await this.list();
  }

  async start(): Promise<void> {
    const resourceVersion = await this.list();
    await this.watch(resourceVersion);
  }

  private async watch(resourceVersion: string): Promise<void> {
    if (this.stopped) return;
    const w = new k8s.Watch(this.kc);
    this.abort = await w.watch(
      '/api/v1/pods',
      { fieldSelector: this.fieldSelector, resourceVersion, allowWatchBookmarks: true },
      (phase, obj: PodObject) => {
        const uid = obj.metadata?.uid;
        if (!uid) return;
        if (phase === 'DELETED') this.byUid.delete(uid);
        else if (phase === 'ADDED' || phase === 'MODIFIED')
          this.byUid.set(uid, toPodView(obj, this.names, this.byUid.get(uid)));
      },
      (err) => {
        if (this.stopped) return;
        if (err) this.log.warn({ err }, 'pod watch ended; relisting');
        setTimeout(() => {
          this.list()
            .then((rv) => this.watch(rv))
            .catch((e) => this.log.warn({ err: e }, 'pod relist failed'));
        }, 1000).unref();
      },
    );
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }
}

export class KubeWriter implements PodAnnotator, EventRecorder, NodePatcher, NodeCapacityPatcher {
  private readonly api: k8s.CoreV1Api;
  private readonly events: PodEventRecorder;

  constructor(
    kc: k8s.KubeConfig,
    nodeName: string,
    private readonly log: Log,
  ) {
    this.api = kc.makeApiClient(k8s.CoreV1Api);
    this.events = createEventRecorder({
      writer: { create: (ns, e) => this.createEvent(ns, e), update: (ns, e) => this.updateEvent(ns, e) },
      component: COMPONENT,
      host: nodeName,
      clock: () => new Date(),
      onError: (err, pod) =>
        this.log.warn(
          { err, pod: `${pod.namespace}/${pod.name}` },
          `event for ${pod.namespace}/${pod.name}: writing failed`,
        ),
    });
  }

  async annotatePod(namespace: string, name: string, annotations: Record<string, string>): Promise<void> {
    await this.api.patchNamespacedPod({ name, namespace, body: { metadata: { annotations } } }, mergePatch);
  }

  /** Repeats for the same pod and reason raise one Event's count (kube/event-recorder.ts). */
  podEvent(pod: { namespace: string; name: string; uid: string }, reason: EventReason, message: string): void {
    this.events.record(pod, reason, message);
  }

  private async createEvent(namespace: string, event: PodEvent): Promise<void> {
    try {
      await this.api.createNamespacedEvent({ namespace, body: event as unknown as k8s.CoreV1Event });
    } catch (err) {
      throw eventWriteError(err, `create event ${namespace}/${event.metadata.name}`);
    }
  }

  private async updateEvent(namespace: string, event: PodEvent): Promise<void> {
    const { count, lastTimestamp, message, series } = event;
    try {
      await this.api.patchNamespacedEvent(
        { namespace, name: event.metadata.name, body: { count, lastTimestamp, message, series } },
        mergePatch,
      );
    } catch (err) {
      throw eventWriteError(err, `update event ${namespace}/${event.metadata.name}`);
    }
  }

  async patchNodeAnnotations(nodeName: string, annotations: Record<string, string>): Promise<void> {
    await this.api.patchNode({ name: nodeName, body: { metadata: { annotations } } }, mergePatch);
  }

  async patchNodeCapacity(nodeName: string, capacity: Record<string, string>): Promise<void> {
    await this.api.patchNodeStatus({ name: nodeName, body: { status: { capacity } } }, mergePatch);
  }
}

/** The mounted `vcuda-jwks` ConfigMap; re-read when the kubelet swaps the file (key rotation). */
export function jwksFromFile(path: string): JwksSource {
  let cached: { mtimeMs: number; jwks: JSONWebKeySet } | undefined;
  return async () => {
    let mtimeMs: number;
    let parsed: JSONWebKeySet;
    try {
      mtimeMs = statSync(path).mtimeMs;
      if (cached?.mtimeMs === mtimeMs) return cached.jwks;
      parsed = JSON.parse(readFileSync(path, 'utf8')) as JSONWebKeySet;
    } catch (err) {
      throw new VcudaError('unavailable', `JWKS ${path}: ${messageOf(err)}`, { cause: err });
    }
    if (!Array.isArray(parsed?.keys)) throw new VcudaError('unavailable', `JWKS ${path}: not a JWKS (no "keys" array)`);
    cached = { mtimeMs, jwks: parsed };
    return cached.jwks;
  };
}

/** The recorder tells a gone Event (re-create it) and a name taken (update it) from other failures. */
function eventWriteError(err: unknown, what: string): VcudaError {
  const code = (err as { code?: number }).code;
  const kind = code === 404 ? 'not-found' : code === 409 ? 'conflict' : 'unavailable';
  return new VcudaError(kind, `${what}: ${messageOf(err)}`, { cause: err });
}
