/**
 * The small Kubernetes REST client the simulated scheduler and kubelets use: the same HTTP calls a
 * real kube-scheduler and kubelet make (list, watch, get, create, patch, binding, delete), nothing more.
 */
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';

export type KubeObj = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
};

export class KubeApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

export type WatchEvent = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR'; object: KubeObj };

export class KubeClient {
  constructor(readonly baseUrl: string) {}

  async request<T = KubeObj>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    const res = await fetch(this.baseUrl + path, {
      method,
      headers: { accept: 'application/json', ...(body !== undefined ? { 'content-type': contentType } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    const parsed = text ? JSON.parse(text) : undefined;
    if (!res.ok) {
      throw new KubeApiError(res.status, parsed?.reason, parsed?.message ?? `${method} ${path}: HTTP ${res.status}`);
    }
    return parsed as T;
  }

  get(path: string): Promise<KubeObj> {
    return this.request('GET', path);
  }

  async list(path: string): Promise<{ items: KubeObj[]; metadata: { resourceVersion: string } }> {
    return this.request('GET', path);
  }

  create(path: string, obj: unknown): Promise<KubeObj> {
    return this.request('POST', path, obj);
  }

  mergePatch(path: string, patch: unknown): Promise<KubeObj> {
    return this.request('PATCH', path, patch, 'application/merge-patch+json');
  }

  strategicPatch(path: string, patch: unknown): Promise<KubeObj> {
    return this.request('PATCH', path, patch, 'application/strategic-merge-patch+json');
  }

  delete(path: string, gracePeriodSeconds?: number): Promise<KubeObj> {
    const q = gracePeriodSeconds === undefined ? '' : `?gracePeriodSeconds=${gracePeriodSeconds}`;
    return this.request('DELETE', path + q);
  }

  /**
   * List then watch, relisting on 410 or a dropped stream, until `signal` aborts.
   * `onSync` receives the full list each (re)list; `onEvent` each change after it.
   */
  async listWatch(
    path: string,
    query: string,
    handlers: { onSync: (items: KubeObj[]) => void; onEvent: (e: WatchEvent) => void },
    signal: AbortSignal,
  ): Promise<void> {
    const sep = query ? `?${query}&` : '?';
    while (!signal.aborted) {
      let rv: string;
      try {
        const list = await this.list(`${path}${query ? `?${query}` : ''}`);
        rv = list.metadata.resourceVersion;
        handlers.onSync(list.items);
      } catch {
        if (signal.aborted) return;
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      try {
        const res = await fetch(`${this.baseUrl}${path}${sep}watch=1&resourceVersion=${rv}&allowWatchBookmarks=true`, {
          signal,
        });
        if (!res.ok || !res.body) throw new Error(`watch ${path}: HTTP ${res.status}`);
        const lines = createInterface({ input: Readable.fromWeb(res.body as never) });
        for await (const line of lines) {
          if (!line.trim()) continue;
          const e = JSON.parse(line) as WatchEvent;
          if (e.type === 'ERROR') break;
          if (e.type !== 'BOOKMARK') handlers.onEvent(e);
        }
      } catch {
        if (signal.aborted) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

export function podPath(namespace: string, name?: string): string {
  return `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods${name ? `/${encodeURIComponent(name)}` : ''}`;
}
