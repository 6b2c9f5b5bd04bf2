/**
 * `?watch=1`: a chunked stream of `{"type":...,"object":...}` lines. Starts from a resourceVersion
 * (replaying the change log) or, without one, with synthetic ADDED events for what exists; an
 * object that stops matching the selectors is reported DELETED, one that starts matching ADDED;
 * a resourceVersion older than the log gets an ERROR event with a 410 Status, as kube-apiserver does.
 * With `render` (kubectl's `Accept: …;as=Table`), each event's object is what it returns: a
 * one-row Table, as kube-apiserver sends to `kubectl get -w`.
 */
import type { ServerResponse } from 'node:http';
import { gone } from './api-status.js';
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
  const send = lineWriter(res, req.render);
  const translate = changeTranslator(req);
  const backlog = backlogOf(store, req, translate);
  if (!backlog) {
    send(expiredEvent(req.resourceVersion, store));
    res.end();
    return;
  }
  // Replay and subscription happen in the same tick, so no change falls between them.
  for (const line of backlog) send(line);
  const unsubscribe = store.subscribe((c) => {
    const line = translate(c);
    if (line) send(line);
  });
  const timers: NodeJS.Timeout[] = [];
  if (req.allowBookmarks) timers.push(startBookmarks(store, req, send));
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

/** Writes one event a line, its object rendered when asked (never an ERROR's or a BOOKMARK's). */
function lineWriter(res: ServerResponse, render: WatchRequest['render']): (line: Line) => void {
  return (line) => {
    if (res.writableEnded) return;
    const shown =
      render && line.type !== 'ERROR' && line.type !== 'BOOKMARK'
        ? { ...line, object: render(line.object as KubeObject) }
        : line;
    res.write(`${JSON.stringify(shown)}\n`);
  };
}

function stamp(req: WatchRequest, o: KubeObject): KubeObject {
  return { ...o, apiVersion: apiVersionOf(req.type), kind: req.type.kind };
}

/**
 * A store change as this watch sees it: none when it is another type or namespace; an object that
 * stops matching the selectors is DELETED, one that starts matching ADDED.
 */
function changeTranslator(req: WatchRequest): (c: Change) => Line | undefined {
  const key = typeKey(req.type);
  const inScope = (o: KubeObject) => req.namespace === undefined || o.metadata.namespace === req.namespace;
  return (c) => {
    if (c.typeKey !== key || !inScope(c.object)) return undefined;
    const now = c.type !== 'DELETED' && req.match(c.object);
    const before = c.previous !== undefined && req.match(c.previous);
    if (c.type === 'ADDED') return now ? { type: 'ADDED', object: stamp(req, c.object) } : undefined;
    if (c.type === 'DELETED') return before ? { type: 'DELETED', object: stamp(req, c.object) } : undefined;
    if (now && before) return { type: 'MODIFIED', object: stamp(req, c.object) };
    if (now) return { type: 'ADDED', object: stamp(req, c.object) };
    if (before) return { type: 'DELETED', object: stamp(req, c.object) };
    return undefined;
  };
}

/**
 * What the watch sends before live changes: ADDED for each matching object without a
 * resourceVersion (or "0"), else the changes since it; undefined when the log no longer reaches it.
 */
function backlogOf(
  store: ObjectStore,
  req: WatchRequest,
  translate: (c: Change) => Line | undefined,
): Line[] | undefined {
  const rv = req.resourceVersion;
  const key = typeKey(req.type);
  if (!rv || rv === '0') {
    return store
      .list(key, req.namespace)
      .filter(req.match)
      .map((o) => ({ type: 'ADDED', object: stamp(req, o) }));
  }
  const since = Number(rv);
  const changes = Number.isInteger(since) ? store.changesSince(key, since) : undefined;
  return changes?.map(translate).filter((l): l is Line => l !== undefined);
}

/** kube-apiserver's answer to a resourceVersion the change log no longer reaches: 410 Expired. */
function expiredEvent(rv: string | undefined, store: ObjectStore): Line {
  const message = `too old resource version: ${rv} (${store.oldestResumableRevision()})`;
  return { type: 'ERROR', object: gone(message).status };
}

/** A BOOKMARK with the store's revision every `bookmarkIntervalMs`. */
function startBookmarks(store: ObjectStore, req: WatchRequest, send: (line: Line) => void): NodeJS.Timeout {
  const timer = setInterval(() => {
    send({
      type: 'BOOKMARK',
      object: {
        apiVersion: apiVersionOf(req.type),
        kind: req.type.kind,
        metadata: { resourceVersion: String(store.currentRevision()) },
      },
    });
  }, req.bookmarkIntervalMs);
  timer.unref();
  return timer;
}
