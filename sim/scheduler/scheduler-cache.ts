/**
 * The simulated scheduler's state, apart from its I/O: the cluster as the watches show it (with
 * the pods this scheduler bound but the watch has not shown yet, kube-scheduler's "assumed" pods)
 * and the queue of pods that failed an attempt (backoff, parking), as kube-scheduler 1.32 keeps them.
 */
import type { KubeObj } from '../kube-client.js';
import { podRequests, type SchedNode, type SchedPod } from './node-filters.js';

/** A pod that failed an attempt: its backoff, and since when it is parked (unschedulable ones only). */
type QueueEntry = { attempts: number; notBefore: number; parkedSince?: number; lastMessage?: string };

export const keyOf = (o: KubeObj) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

export type BackoffPolicy = { initialMs: number; maxMs: number; maxParkedMs: number };

/** Pods that failed an attempt: each waits out its backoff, and unschedulable ones stay parked until an event. */
export class SchedulingQueue {
  private readonly entries = new Map<string, QueueEntry>();

  constructor(private readonly policy: BackoffPolicy) {}

  /** A cluster event: every parked pod may fit now (after its backoff). */
  unparkAll(): void {
    for (const e of this.entries.values()) delete e.parkedSince;
  }

  unpark(key: string): void {
    const e = this.entries.get(key);
    if (e) delete e.parkedSince;
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  ready(key: string, t: number): boolean {
    const e = this.entries.get(key);
    if (!e) return true;
    if (e.parkedSince !== undefined && t - e.parkedSince >= this.policy.maxParkedMs) delete e.parkedSince;
    return e.parkedSince === undefined && e.notBefore <= t;
  }

  /** Milliseconds until the pod may be tried again (0 when it may now). */
  waitOf(key: string, t: number): number {
    const e = this.entries.get(key);
    return (e?.parkedSince !== undefined ? e.parkedSince + this.policy.maxParkedMs : (e?.notBefore ?? 0)) - t;
  }

  /** Records a failed attempt; false when its message repeats the last one (no new event then). */
  fail(key: string, message: string, parked: boolean, t: number): boolean {
    const entry = this.entries.get(key) ?? { attempts: 0, notBefore: 0 };
    entry.attempts++;
    entry.notBefore = t + Math.min(this.policy.maxMs, this.policy.initialMs * 2 ** (entry.attempts - 1));
    if (parked) entry.parkedSince = t;
    else delete entry.parkedSince;
    const repeated = entry.lastMessage === message;
    entry.lastMessage = message;
    this.entries.set(key, entry);
    return !repeated;
  }
}

/** What a watch event means to the scheduler: nothing, a cluster change (unpark all) or a pod's own update. */
export type CacheChange = 'cluster' | 'pod-metadata' | 'other';

export class ClusterCache {
  readonly nodes = new Map<string, SchedNode>();
  private readonly pods = new Map<string, KubeObj>();
  /** Pods this loop bound whose binding the watch has not shown yet. */
  private readonly assumed = new Map<string, string>();

  constructor(private readonly schedulerNames: Set<string>) {}

  syncNodes(items: KubeObj[]): void {
    this.nodes.clear();
    for (const n of items) this.nodes.set(n.metadata.name, n as unknown as SchedNode);
  }

  nodeEvent(type: string, node: KubeObj): void {
    if (type === 'DELETED') this.nodes.delete(node.metadata.name);
    else this.nodes.set(node.metadata.name, node as unknown as SchedNode);
  }

  syncPods(items: KubeObj[]): void {
    this.pods.clear();
    for (const p of items) this.pods.set(keyOf(p), p);
  }

  /**
   * A pod event. A pod gone or an assigned pod changing (allocated, finished) may free what waiting
   * pods need, as kube-scheduler's AssignedPodUpdate event moves them back to the active queue; a
   * pending pod's own label or annotation change (the control plane's capacity nudge) unparks it.
   */
  podEvent(type: string, pod: KubeObj): CacheChange {
    const k = keyOf(pod);
    if (type === 'DELETED') {
      this.pods.delete(k);
      this.assumed.delete(k);
      return 'cluster';
    }
    const before = this.pods.get(k);
    this.pods.set(k, pod);
    if ((pod.spec as { nodeName?: string })?.nodeName) {
      this.assumed.delete(k);
      return 'cluster';
    }
    const same = (a: unknown, b: unknown) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {});
    const changed =
      !same(before?.metadata.annotations, pod.metadata.annotations) ||
      !same(before?.metadata.labels, pod.metadata.labels);
    return changed ? 'pod-metadata' : 'other';
  }

  assume(pod: KubeObj, node: string): void {
    this.assumed.set(keyOf(pod), node);
  }

  forget(pod: KubeObj): void {
    this.assumed.delete(keyOf(pod));
  }

  isAssumed(pod: KubeObj): boolean {
    return this.assumed.has(keyOf(pod));
  }

  private nodeOf(p: KubeObj): string | undefined {
    return (p.spec as { nodeName?: string } | undefined)?.nodeName || this.assumed.get(keyOf(p));
  }

  /** The live pods on (or assumed on) `node`. */
  podsOn(node: string): KubeObj[] {
    return [...this.pods.values()].filter((p) => {
      const phase = (p.status as { phase?: string } | undefined)?.phase;
      return this.nodeOf(p) === node && phase !== 'Succeeded' && phase !== 'Failed';
    });
  }

  /** What the live pods on (or assumed on) `node` request, `pods` included; `except` as if gone (preemption). */
  usedOnNode(node: string, except?: ReadonlySet<KubeObj>): Map<string, number> {
    const used = new Map<string, number>([['pods', 0]]);
    for (const p of this.pods.values()) {
      const phase = (p.status as { phase?: string } | undefined)?.phase;
      if (this.nodeOf(p) !== node || phase === 'Succeeded' || phase === 'Failed' || except?.has(p)) continue;
      used.set('pods', used.get('pods')! + 1);
      for (const [k, v] of podRequests(p as unknown as SchedPod)) used.set(k, (used.get(k) ?? 0) + v);
    }
    return used;
  }

  /**
   * What the pods nominated to `node` (waiting there for their victims to go) request, counting
   * only those `pod` must leave room for: of at least its priority, itself excluded. kube-scheduler
   * runs its filters with these added, so a lower-priority pod cannot take what was freed for them.
   */
  nominatedOn(node: string, pod: KubeObj): Map<string, number> {
    const priority = (p: KubeObj) => (p.spec as { priority?: number } | undefined)?.priority ?? 0;
    const used = new Map<string, number>([['pods', 0]]);
    for (const p of this.pods.values()) {
      const nominated = (p.status as { nominatedNodeName?: string } | undefined)?.nominatedNodeName;
      if (nominated !== node || this.nodeOf(p) || p.metadata.uid === pod.metadata.uid) continue;
      if (p.metadata.deletionTimestamp || priority(p) < priority(pod)) continue;
      used.set('pods', used.get('pods')! + 1);
      for (const [k, v] of podRequests(p as unknown as SchedPod)) used.set(k, (used.get(k) ?? 0) + v);
    }
    return used;
  }

  /** Unbound pods for this scheduler, oldest first. */
  pendingPods(): KubeObj[] {
    return [...this.pods.values()]
      .filter((p) => {
        const name = (p.spec as { schedulerName?: string } | undefined)?.schedulerName ?? 'default-scheduler';
        return !this.nodeOf(p) && !p.metadata.deletionTimestamp && this.schedulerNames.has(name);
      })
      .sort((a, b) => String(a.metadata['creationTimestamp']).localeCompare(String(b.metadata['creationTimestamp'])));
  }
}
