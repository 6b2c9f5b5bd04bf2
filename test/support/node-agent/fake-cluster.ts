/**
 * An in-memory API server slice for node-agent tests: the pods bound to a node (PodSource),
 * annotation patches, recorded events and Node patches. Never used by product code.
 */
import { type EventReason, type ResourceNames, vcudaAnnotations } from '../../../contract/index.js';
import type { NodeCapacityPatcher } from '../../../node-agent/agent.js';
import { type PodObject, type PodView, toPodView } from '../../../node-agent/allocation/pod-view.js';
import type { EventRecorder, PodAnnotator, PodSource } from '../../../node-agent/allocation/ports.js';
import type { NodePatcher } from '../../../node-agent/inventory.js';

export type RecordedEvent = { namespace: string; name: string; reason: EventReason; message: string };

export class FakeCluster implements PodSource, PodAnnotator, EventRecorder, NodePatcher, NodeCapacityPatcher {
  readonly objects = new Map<string, PodObject>();
  readonly events: RecordedEvent[] = [];
  readonly nodeAnnotations = new Map<string, Record<string, string>>();
  readonly nodeCapacity = new Map<string, Record<string, string>>();
  nodePatches = 0;
  /** The next N pod annotation patches fail (an API server hiccup). */
  failAnnotations = 0;
  refreshes = 0;
  private readonly watchers = new Set<() => void>();

  constructor(private readonly names: ResourceNames) {}

  put(pod: PodObject): void {
    const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    this.objects.set(key, structuredClone(pod));
    for (const w of this.watchers) w();
  }

  get(namespace: string, name: string): PodObject | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  delete(namespace: string, name: string): void {
    this.objects.delete(`${namespace}/${name}`);
  }

  onChange(listener: () => void): () => void {
    this.watchers.add(listener);
    return () => this.watchers.delete(listener);
  }

  pods(): PodView[] {
    return [...this.objects.values()].map((p) => toPodView(p, this.names));
  }

  isShown(podUid: string): boolean {
    for (const p of this.objects.values()) if (p.metadata?.uid === podUid) return true;
    return false;
  }

  async refresh(): Promise<void> {
    this.refreshes++;
  }

  async annotatePod(namespace: string, name: string, annotations: Record<string, string>): Promise<void> {
    if (this.failAnnotations > 0) {
      this.failAnnotations--;
      throw new Error('injected: the server is currently unable to handle the request');
    }
    const pod = this.get(namespace, name);
    if (!pod) throw new Error(`pod ${namespace}/${name} not found`);
    pod.metadata = { ...pod.metadata, annotations: { ...(pod.metadata?.annotations ?? {}), ...annotations } };
    for (const w of this.watchers) w();
  }

  podEvent(pod: { namespace: string; name: string }, reason: EventReason, message: string): void {
    this.events.push({ namespace: pod.namespace, name: pod.name, reason, message });
  }

  eventsOf(namespace: string, name: string): RecordedEvent[] {
    return this.events.filter((e) => e.namespace === namespace && e.name === name);
  }

  isAllocated(namespace: string, name: string): boolean {
    return Boolean(this.get(namespace, name)?.metadata?.annotations?.[vcudaAnnotations.allocatedAt]);
  }

  async patchNodeAnnotations(nodeName: string, annotations: Record<string, string>): Promise<void> {
    this.nodePatches++;
    this.nodeAnnotations.set(nodeName, { ...(this.nodeAnnotations.get(nodeName) ?? {}), ...annotations });
  }

  async patchNodeCapacity(nodeName: string, capacity: Record<string, string>): Promise<void> {
    this.nodeCapacity.set(nodeName, { ...(this.nodeCapacity.get(nodeName) ?? {}), ...capacity });
  }
}
