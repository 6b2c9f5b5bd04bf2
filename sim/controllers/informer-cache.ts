/**
 * The controllers' view of the cluster: one list+watch per kind kept in memory by uid (as
 * client-go's informers keep theirs), and written through with every object the controllers'
 * own writes return, so the next pass never acts twice on a change its watch has not delivered yet.
 */
import type { KubeClient, KubeObj, WatchEvent } from '../kube-client.js';

export type WatchedKind = 'pods' | 'replicasets' | 'deployments' | 'jobs' | 'resourceclaims' | 'resourceclaimtemplates';

/** The kinds every cluster serves; DRA's claims and templates are watched only where `resource.k8s.io/v1` is served. */
export const WORKLOAD_KINDS: readonly WatchedKind[] = ['pods', 'replicasets', 'deployments', 'jobs'];
export const DRA_KINDS: readonly WatchedKind[] = ['resourceclaims', 'resourceclaimtemplates'];
const DRA_GV = '/apis/resource.k8s.io/v1';

export const KIND_PATHS: Record<WatchedKind, { list: string; collection: (ns: string) => string }> = {
  pods: { list: '/api/v1/pods', collection: (ns) => `/api/v1/namespaces/${ns}/pods` },
  replicasets: { list: '/apis/apps/v1/replicasets', collection: (ns) => `/apis/apps/v1/namespaces/${ns}/replicasets` },
  deployments: { list: '/apis/apps/v1/deployments', collection: (ns) => `/apis/apps/v1/namespaces/${ns}/deployments` },
  jobs: { list: '/apis/batch/v1/jobs', collection: (ns) => `/apis/batch/v1/namespaces/${ns}/jobs` },
  resourceclaims: { list: `${DRA_GV}/resourceclaims`, collection: (ns) => `${DRA_GV}/namespaces/${ns}/resourceclaims` },
  resourceclaimtemplates: {
    list: `${DRA_GV}/resourceclaimtemplates`,
    collection: (ns) => `${DRA_GV}/namespaces/${ns}/resourceclaimtemplates`,
  },
};

/** The path of one object of `kind`. */
export function objectPath(kind: WatchedKind, obj: KubeObj): string {
  const ns = encodeURIComponent(obj.metadata.namespace ?? 'default');
  return `${KIND_PATHS[kind].collection(ns)}/${encodeURIComponent(obj.metadata.name)}`;
}

const rv = (o: KubeObj) => Number(o.metadata.resourceVersion ?? 0);

export class InformerCache {
  private readonly objects = new Map<WatchedKind, Map<string, KubeObj>>();
  private readonly synced = new Set<WatchedKind>();

  /** `kinds`: those watched; the others stay empty. */
  constructor(
    private readonly onChange: () => void,
    private readonly kinds: readonly WatchedKind[] = WORKLOAD_KINDS,
  ) {
    for (const kind of Object.keys(KIND_PATHS) as WatchedKind[]) this.objects.set(kind, new Map());
  }

  /** Starts every watched kind's list+watch; they run until `signal` aborts. */
  start(client: KubeClient, signal: AbortSignal): void {
    for (const kind of this.kinds) {
      void client.listWatch(
        KIND_PATHS[kind].list,
        '',
        {
          onSync: (items) => {
            const fresh = new Map(items.map((o) => [String(o.metadata.uid), o]));
            this.objects.set(kind, fresh);
            this.synced.add(kind);
            this.onChange();
          },
          onEvent: (e) => this.apply(kind, e),
        },
        signal,
      );
    }
  }

  /** Every kind listed at least once: before that, an owner not seen yet would look deleted. */
  hasSynced(): boolean {
    return this.kinds.every((k) => this.synced.has(k));
  }

  private apply(kind: WatchedKind, e: WatchEvent): void {
    const map = this.objects.get(kind)!;
    const uid = String(e.object.metadata.uid);
    if (e.type === 'DELETED') map.delete(uid);
    else this.store(kind, e.object);
    this.onChange();
  }

  /** Keeps `obj` unless a newer version of it is held already. */
  store(kind: WatchedKind, obj: KubeObj): void {
    const map = this.objects.get(kind)!;
    const uid = String(obj.metadata.uid);
    const held = map.get(uid);
    if (!held || rv(held) <= rv(obj)) map.set(uid, obj);
  }

  forget(kind: WatchedKind, obj: KubeObj): void {
    this.objects.get(kind)!.delete(String(obj.metadata.uid));
  }

  list(kind: WatchedKind): KubeObj[] {
    return [...this.objects.get(kind)!.values()];
  }

  has(kind: WatchedKind, uid: string): boolean {
    return this.objects.get(kind)!.has(uid);
  }

  /** The objects of `kind` grouped by namespace. */
  byNamespace(kind: WatchedKind): Map<string, KubeObj[]> {
    const out = new Map<string, KubeObj[]>();
    for (const o of this.objects.get(kind)!.values()) {
      const ns = o.metadata.namespace ?? 'default';
      const list = out.get(ns);
      if (list) list.push(o);
      else out.set(ns, [o]);
    }
    return out;
  }
}
