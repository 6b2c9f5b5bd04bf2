/**
 * The simulated cluster's state: objects by type, one resourceVersion counter for all of them
 * (as etcd's revision), and a bounded log of changes that watches resume from. Everything is
 * synchronous, so a write and the events it causes are one atomic step.
 */
import type { KubeObject } from './selectors.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export type Change = {
  readonly type: ChangeType;
  readonly typeKey: string;
  readonly resourceVersion: number;
  readonly object: KubeObject;
  /** The object before the change (MODIFIED, DELETED). */
  readonly previous?: KubeObject;
};

export type ChangeListener = (change: Change) => void;

function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

export class ObjectStore {
  private revision = 1;
  private readonly byType = new Map<string, Map<string, KubeObject>>();
  private readonly log: Change[] = [];
  private readonly listeners = new Set<ChangeListener>();

  constructor(private readonly logCapacity = 20_000) {}

  currentRevision(): number {
    return this.revision;
  }

  /** The oldest revision a watch can still resume after; older ones get 410 Gone. */
  oldestResumableRevision(): number {
    return this.log.length === 0 ? this.revision : this.log[0]!.resourceVersion - 1;
  }

  get(typeKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.byType.get(typeKey)?.get(objectKey(namespace, name));
    return obj ? structuredClone(obj) : undefined;
  }

  /** Objects of a type, optionally in one namespace, sorted by namespace and name as etcd returns them. */
  list(typeKey: string, namespace?: string): KubeObject[] {
    const all = [...(this.byType.get(typeKey)?.values() ?? [])];
    const items = namespace === undefined ? all : all.filter((o) => o.metadata.namespace === namespace);
    return items
      .map((o) => structuredClone(o))
      .sort((a, b) =>
        objectKey(a.metadata.namespace, a.metadata.name).localeCompare(
          objectKey(b.metadata.namespace, b.metadata.name),
        ),
      );
  }

  /** Stores a new object; the caller checked it does not exist. Returns the stored copy. */
  insert(typeKey: string, obj: KubeObject): KubeObject {
    return this.write('ADDED', typeKey, obj, undefined);
  }

  update(typeKey: string, obj: KubeObject): KubeObject {
    const previous = this.byType.get(typeKey)?.get(objectKey(obj.metadata.namespace, obj.metadata.name));
    return this.write('MODIFIED', typeKey, obj, previous);
  }

  remove(typeKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const map = this.byType.get(typeKey);
    const previous = map?.get(objectKey(namespace, name));
    if (!map || !previous) return undefined;
    map.delete(objectKey(namespace, name));
    // A deletion has its own revision, and the deleted object carries it (as kube-apiserver does).
    const object = structuredClone(previous);
    object.metadata.resourceVersion = String(++this.revision);
    this.emit({ type: 'DELETED', typeKey, resourceVersion: this.revision, object, previous });
    return structuredClone(object);
  }

  /** Changes of a type after `revision`, or undefined when the log no longer reaches back that far. */
  changesSince(typeKey: string, revision: number): Change[] | undefined {
    if (revision < this.oldestResumableRevision()) return undefined;
    return this.log.filter((c) => c.typeKey === typeKey && c.resourceVersion > revision);
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private write(type: ChangeType, typeKey: string, obj: KubeObject, previous: KubeObject | undefined): KubeObject {
    let map = this.byType.get(typeKey);
    if (!map) {
      map = new Map();
      this.byType.set(typeKey, map);
    }
    const stored = structuredClone(obj);
    stored.metadata.resourceVersion = String(++this.revision);
    map.set(objectKey(stored.metadata.namespace, stored.metadata.name), stored);
    this.emit({ type, typeKey, resourceVersion: this.revision, object: stored, ...(previous ? { previous } : {}) });
    return structuredClone(stored);
  }

  private emit(change: Change): void {
    this.log.push(change);
    if (this.log.length > this.logCapacity) this.log.splice(0, this.log.length - this.logCapacity);
    for (const l of this.listeners) l(change);
  }
}
