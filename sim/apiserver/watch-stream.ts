/**
 * `?watch=1`: a chunked stream of `{"type":...,"object":...}` lines. Starts from a resourceVersion
 * (replaying the change log) or, without one, with synthetic ADDED events for what exists; an
 * object that stops matching the selectors is reported DELETED, one that starts matching ADDED;
 * a resourceVersion older than the log gets an ERROR event with a 410 Status, as kube-apiserver does.
 * With `render` (kubectl's `Accept: …;as=Table`), each event's object is what it returns: a
 * one-row Table, as kube-apiserver sends to `kubectl get -w`.
 */
import type { ServerResponse } from 'node:http';
import type { Change, ObjectStore } from './object-store.js';
import { apiVersionOf, type ResourceType, typeKey } from './resource-registry.js';
import type { KubeObject, Matcher } from './selectors.js';

export type WatchRequest = {
  type: ResourceType;
  namespace?: string;
  match: Matcher;
  resourceVersion?: string;
  timeoutSeconds?: number;
  allowBookmarks: boolean;
  bookmarkIntervalMs: number;
  /** The object an ADDED/MODIFIED/DELETED event carries instead of the resource itself. */
  render?: (o: KubeObject) => unknown;
};

type Line = { type: string; object: unknown };

export function serveWatch(
  store: ObjectStore,
  req: WatchRequest,
  res: ServerResponse,
  onClose: (fn: () => void) => void,
): void {
  res.writeHead(200, {
    'content-type': 'application/json',
    'transfer-encoding': 'chunked',
    'cache-control': 'no-cache',
  });
  res.flushHeaders();
  const key = typeKey(req.type);
  const stamp = (o: KubeObject): KubeObject => ({ ...o, apiVersion: apiVersionOf(req.type), kind: req.type.kind });
  const inScope = (o: KubeObject) => req.namespace === undefined || o.metadata.namespace === req.namespace;
  const render = req.render;
  const send = (line: Line) => {
    if (res.writableEnded) return;
    const shown =
      render && line.type !== 'ERROR' && line.type !== 'BOOKMARK'
        ? { ...line, object: render(line.object as KubeObject) }
        : line;
    res.write(`${JSON.stringify(shown)}\n`);
  };
  const translate = (c: Change): Line | undefined => {
    if (c.typeKey !== key || !inScope(c.object)) return undefined;
    const now = c.type !== 'DELETED' && req.match(c.object);
    const before = c.previous !== undefined && req.match(c.previous);
    if (c.type === 'ADDED') return now ? { type: 'ADDED', object: stamp(c.object) } : undefined;
    if (c.type === 'DELETED') return before ? { type: 'DELETED', object: stamp(c.object) } : undefined;
    if (now && before) return { type: 'MODIFIED', object: stamp(c.object) };
    if (now) return { type: 'ADDED', object: stamp(c.object) };
    if (before) return { type: 'DELETED', object: stamp(c.object) };
    return undefined;
  };

  const rv = req.resourceVersion;
  let backlog: Line[];
  if (!rv || rv === '0') {
    backlog = store
      .list(key, req.namespace)
      .filter(req.match)
      .map((o) => ({ type: 'ADDED', object: stamp(o) }));
  } else {
    const since = Number(rv);
    const changes = Number.isInteger(since) ? store.changesSince(key, since) : undefined;
    if (!changes) {
      send({
        type: 'ERROR',
        object: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `too old resource version: ${rv} (${store.oldestResumableRevision()})`,
          reason: 'Expired',
          code: 410,
        },
      });
      res.end();
      return;
    }
    backlog = changes.map(translate).filter((l): l is Line => l !== undefined);
  }
  // Replay and subscription happen in the same tick, so no change falls between them.
  for (const line of backlog) send(line);
  const unsubscribe = store.subscribe((c) => {
    const line = translate(c);
    if (line) send(line);
  });
  const timers: NodeJS.Timeout[] = [];
  if (req.allowBookmarks) {
    const t = setInterval(() => {
      send({
        type: 'BOOKMARK',
        object: {
          apiVersion: apiVersionOf(req.type),
          kind: req.type.kind,
          metadata: { resourceVersion: String(store.currentRevision()) },
        },
      });
    }, req.bookmarkIntervalMs);
    t.unref();
    timers.push(t);
  }
  const finish = () => {
    unsubscribe();
    for (const t of timers) clearInterval(t);
    if (!res.writableEnded) res.end();
  };
  if (req.timeoutSeconds && req.timeoutSeconds > 0) {
    const t = setTimeout(finish, req.timeoutSeconds * 1000);
    t.unref();
    timers.push(t);
  }
  res.on('close', finish);
  onClose(finish);
}
