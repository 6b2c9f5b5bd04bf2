/**
 * The simulated cluster's state: objects by type, one resourceVersion counter for all of them
 * (as etcd's revision), and a bounded log of changes that watches resume from. Everything is
 * synchronous, so a write and the events it causes are one atomic step.
 *
 * Stored objects are deeply frozen, so readers share them instead of copying them, a write may
 * reuse the unchanged parts of the object it replaces, and each object's JSON is encoded at most
 * once however many responses and watch events carry it (kube-apiserver's cachingObject).
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

/**
 * Freezes a JSON value in place, skipping what is frozen already: only this store freezes, and it
 * always freezes deeply, so a frozen part is an unchanged part of a stored object.
 */
function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
  return value;
}

/** As `localeCompare` orders strings, without its per-call locale lookup. */
const keyOrder = new Intl.Collator().compare;

/** The objects of one type by key, and their keys sorted while no key comes or goes. */
type TypeTable = { objects: Map<string, KubeObject>; sortedKeys?: string[] };

export class ObjectStore {
  private revision = 1;
  private readonly byType = new Map<string, TypeTable>();
  /** The change log is `log[logStart..]`: dropping the oldest moves the start, compaction is rare. */
  private log: Change[] = [];
  private logStart = 0;
  /** By type: a change is offered only to the watches of its own type. */
  private readonly listeners = new Map<string, Set<ChangeListener>>();
  /** JSON bytes of the current objects (and of a tombstone while its event goes out), encoded on first use. */
  private readonly encodings = new WeakMap<KubeObject, Buffer | undefined>();

  constructor(private readonly logCapacity = 20_000) {}

  currentRevision(): number {
    return this.revision;
  }

  /** The oldest revision a watch can still resume after; older ones get 410 Gone. */
  oldestResumableRevision(): number {
    const oldest = this.log[this.logStart];
    return oldest === undefined ? this.revision : oldest.resourceVersion - 1;
  }

  /** The stored object, frozen: a writer builds a new object (sharing the unchanged parts). */
  get(typeKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.byType.get(typeKey)?.objects.get(objectKey(namespace, name));
  }

  /** Objects of a type, optionally in one namespace, sorted by namespace and name as etcd returns them; frozen. */
  list(typeKey: string, namespace?: string): KubeObject[] {
    const table = this.byType.get(typeKey);
    if (!table) return [];
    table.sortedKeys ??= [...table.objects.keys()].sort(keyOrder);
    const items: KubeObject[] = [];
    for (const key of table.sortedKeys) {
      const obj = table.objects.get(key)!;
      if (namespace === undefined || obj.metadata.namespace === namespace) items.push(obj);
    }
    return items;
  }

  /**
   * `JSON.stringify(obj)` as UTF-8: encoded once for a current stored object (or a tombstone while
   * its DELETED event is delivered), freshly for anything else. The bytes are shared: never write to them.
   */
  jsonBytes(obj: unknown): Buffer {
    if (!this.encodings.has(obj as KubeObject)) return Buffer.from(JSON.stringify(obj), 'utf8');
    let bytes = this.encodings.get(obj as KubeObject);
    if (bytes === undefined) {
      bytes = Buffer.from(JSON.stringify(obj), 'utf8');
      this.encodings.set(obj as KubeObject, bytes);
    }
    return bytes;
  }

  /** Stores a new object; the caller checked it does not exist. Returns the stored (frozen) object. */
  insert(typeKey: string, obj: KubeObject): KubeObject {
    return this.write('ADDED', typeKey, obj, undefined);
  }

  update(typeKey: string, obj: KubeObject): KubeObject {
    const previous = this.get(typeKey, obj.metadata.namespace, obj.metadata.name);
    return this.write('MODIFIED', typeKey, obj, previous);
  }

  remove(typeKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const table = this.byType.get(typeKey);
    const key = objectKey(namespace, name);
    const previous = table?.objects.get(key);
    if (!table || !previous) return undefined;
    table.objects.delete(key);
    table.sortedKeys = undefined;
    this.encodings.delete(previous);
    // A deletion has its own revision, and the deleted object carries it (as kube-apiserver does).
    const object = this.sealed(previous);
    this.encodings.set(object, undefined);
    this.emit({ type: 'DELETED', typeKey, resourceVersion: this.revision, object, previous });
    // The tombstone's JSON was for its watchers; the log keeps the object, not its bytes.
    this.encodings.delete(object);
    return object;
  }

  /** Changes of a type after `revision`, or undefined when the log no longer reaches back that far. */
  changesSince(typeKey: string, revision: number): Change[] | undefined {
    if (revision < this.oldestResumableRevision()) return undefined;
    const out: Change[] = [];
    for (let i = this.firstLogIndexAfter(revision); i < this.log.length; i++) {
      const c = this.log[i]!;
      if (c.typeKey === typeKey) out.push(c);
    }
    return out;
  }

  /** Calls `listener` with every change of a type from now on, until the returned function is called. */
  subscribe(typeKey: string, listener: ChangeListener): () => void {
    const set = this.listeners.get(typeKey) ?? new Set<ChangeListener>();
    this.listeners.set(typeKey, set);
    set.add(listener);
    return () => set.delete(listener);
  }

  /** The log is in revision order: a binary search finds where a resume starts. */
  private firstLogIndexAfter(revision: number): number {
    let lo = this.logStart;
    let hi = this.log.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.log[mid]!.resourceVersion > revision) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  /** `obj` with the next revision, frozen; its parts are frozen in place (they now belong to the store). */
  private sealed(obj: KubeObject): KubeObject {
    const stored = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(++this.revision) } };
    return deepFreeze(stored);
  }

  private write(type: ChangeType, typeKey: string, obj: KubeObject, previous: KubeObject | undefined): KubeObject {
    let table = this.byType.get(typeKey);
    if (!table) {
      table = { objects: new Map() };
      this.byType.set(typeKey, table);
    }
    const stored = this.sealed(obj);
    const key = objectKey(stored.metadata.namespace, stored.metadata.name);
    if (!table.objects.has(key)) table.sortedKeys = undefined;
    const replaced = table.objects.get(key);
    if (replaced) this.encodings.delete(replaced);
    table.objects.set(key, stored);
    this.encodings.set(stored, undefined);
    this.emit({ type, typeKey, resourceVersion: this.revision, object: stored, ...(previous ? { previous } : {}) });
    return stored;
  }

  private emit(change: Change): void {
    this.log.push(change);
    const excess = this.log.length - this.logStart - this.logCapacity;
    if (excess > 0) this.logStart += excess;
    // Compacting only once the dropped part is as long as the log keeps the drop amortised O(1).
    if (this.logStart >= this.logCapacity) {
      this.log = this.log.slice(this.logStart);
      this.logStart = 0;
    }
    for (const l of this.listeners.get(change.typeKey) ?? []) l(change);
  }
}
