/**
 * The small Kubernetes REST client the simulated scheduler and kubelets use: the same HTTP calls a
 * real kube-scheduler and kubelet make (list, watch, get, create, patch, binding, delete), nothing more.
 * Plain `node:http` over keep-alive connections: fetch's web streams cost several times the CPU
 * per call, and every simulated node makes a few calls per pod.
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';

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

/** The server closed a reused keep-alive connection before answering: the call was not served. */
class StaleConnectionError extends Error {
  constructor(cause: Error) {
    super(`${cause.message} (a reused keep-alive connection, closed by the server)`, { cause });
  }
}

export type WatchEvent = { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR'; object: KubeObj };

/** A call the API server has not answered by then fails, as client-go's request timeout does. */
const REQUEST_TIMEOUT_MS = 30_000;

/** How a client proves who it is and whom it trusts: a bearer token, and the API server's CA. */
export type ApiCredentials = { token?: string; caPem?: string };

export class KubeClient {
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;
  private readonly authorization: Record<string, string>;

  constructor(
    readonly baseUrl: string,
    credentials: ApiCredentials = {},
  ) {
    const tls = baseUrl.startsWith('https:');
    this.transport = tls ? https : http;
    this.agent = tls
      ? new https.Agent({ keepAlive: true, ...(credentials.caPem ? { ca: credentials.caPem } : {}) })
      : new http.Agent({ keepAlive: true });
    this.authorization = credentials.token ? { authorization: `Bearer ${credentials.token}` } : {};
  }

  async request<T = KubeObj>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    const payload = body !== undefined ? JSON.stringify(body) : undefined;
    const { status, text } = await this.send(method, path, payload, contentType);
    const parsed = text ? JSON.parse(text) : undefined;
    if (status < 200 || status > 299) {
      throw new KubeApiError(status, parsed?.reason, parsed?.message ?? `${method} ${path}: HTTP ${status}`);
    }
    return parsed as T;
  }

  /** A GET whose answer is text (a pod's log), with the status it came with. */
  getText(path: string): Promise<{ status: number; text: string }> {
    return this.send('GET', path, undefined, 'application/json');
  }

  /**
   * One call. A call on a reused keep-alive connection that the server closed as the call went out
   * (ECONNRESET before any answer) was never served: a call that is safe to repeat is sent once
   * more on a fresh connection, as Go's transport (client-go) does for a closed idle connection.
   * A POST is not repeated: the server may have created the object.
   */
  private async send(
    method: string,
    path: string,
    payload: string | undefined,
    contentType: string,
  ): Promise<{ status: number; text: string }> {
    try {
      return await this.sendOnce(method, path, payload, contentType);
    } catch (err) {
      if (method === 'POST' || !(err instanceof StaleConnectionError)) throw err;
      return this.sendOnce(method, path, payload, contentType);
    }
  }

  private sendOnce(
    method: string,
    path: string,
    payload: string | undefined,
    contentType: string,
  ): Promise<{ status: number; text: string }> {
    // Content-Length always: Node sends a DELETE's body neither chunked nor sized otherwise.
    const headers = {
      accept: 'application/json',
      ...this.authorization,
      ...(payload !== undefined ? { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) } : {}),
    };
    return new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = this.transport.request(this.baseUrl + path, { method, headers, agent: this.agent }, (res) => {
        readAll(res).then((t) => resolve({ status: res.statusCode ?? 0, text: t }), reject);
      });
      req.setTimeout(REQUEST_TIMEOUT_MS, () =>
        req.destroy(new Error(`${method} ${path}: no answer within ${REQUEST_TIMEOUT_MS / 1000} s`)),
      );
      req.on('error', (err: NodeJS.ErrnoException) =>
        reject(req.reusedSocket && err.code === 'ECONNRESET' ? new StaleConnectionError(err) : err),
      );
      req.end(payload);
    });
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
        const res = await this.openWatch(`${path}${sep}watch=1&resourceVersion=${rv}&allowWatchBookmarks=true`, signal);
        const lines = createInterface({ input: res });
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

  /** The watch's response stream once its headers say 200; it ends when the server or `signal` ends it. */
  private openWatch(pathAndQuery: string, signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const options = { agent: this.agent, signal, headers: this.authorization };
      const req = this.transport.get(this.baseUrl + pathAndQuery, options, (res) => {
        if (res.statusCode === 200) return resolve(res);
        res.resume();
        reject(new Error(`watch ${pathAndQuery}: HTTP ${res.statusCode}`));
      });
      req.on('error', reject);
    });
  }
}

/** The whole body of a response, as UTF-8. */
function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.once('error', reject);
  });
}

export function podPath(namespace: string, name?: string): string {
  return `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods${name ? `/${encodeURIComponent(name)}` : ''}`;
}
