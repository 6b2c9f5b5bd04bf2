/**
 * `?watch=1`: a chunked stream of `{"type":...,"object":...}` lines. Starts from a resourceVersion
 * (replaying the change log) or, without one, with synthetic ADDED events for what exists; an
 * object that stops matching the selectors is reported DELETED, one that starts matching ADDED;
 * a resourceVersion older than the log gets an ERROR event with a 410 Status, as kube-apiserver does.
 * With `render` (kubectl's `Accept: …;as=Table`), each event's object is what it returns: a
 * one-row Table, as kube-apiserver sends to `kubectl get -w`.
 *
 * A change's line is encoded once and its bytes shared by every watch that sends it
 * (kube-apiserver's cachingObject): selectors only decide whether, and as which type, a watch
 * sends the change, never what its object holds.
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

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

/** One event; `change` when its object is that change's object, so its line can be shared. */
type Line = { type: EventType; object: unknown; change?: Change };

/**
 * The encoded lines of the change being delivered, one per event type. Every watch receives a
 * change in the same synchronous step, so remembering the last change is enough to share them.
 */
export class SharedEventLines {
  private change: Change | undefined;
  private readonly lines = new Map<EventType, Buffer>();

  constructor(private readonly store: ObjectStore) {}

  /** `{"type":<type>,"object":<change.object>}` and a newline, encoded once per change and type. */
  lineOf(change: Change, type: EventType): Buffer {
    if (change !== this.change) {
      this.change = change;
      this.lines.clear();
    }
    let line = this.lines.get(type);
    if (!line) {
      line = this.lineOfObject(type, change.object);
      this.lines.set(type, line);
    }
    return line;
  }

  /** What `JSON.stringify({ type, object })` and a newline write, the object's JSON shared when it is stored. */
  lineOfObject(type: EventType, object: unknown): Buffer {
    return Buffer.concat([LINE_STARTS[type], this.store.jsonBytes(object), LINE_END]);
  }
}

const LINE_STARTS: Record<EventType, Buffer> = {
  ADDED: Buffer.from('{"type":"ADDED","object":'),
  MODIFIED: Buffer.from('{"type":"MODIFIED","object":'),
  DELETED: Buffer.from('{"type":"DELETED","object":'),
  BOOKMARK: Buffer.from('{"type":"BOOKMARK","object":'),
  ERROR: Buffer.from('{"type":"ERROR","object":'),
};
const LINE_END = Buffer.from('}\n');

export function serveWatch(
  store: ObjectStore,
  lines: SharedEventLines,
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
  const send = lineWriter(res, lines, req.render);
  const translate = changeTranslator(req);
  const backlog = backlogOf(store, req, translate);
  if (!backlog) {
    send(expiredEvent(req.resourceVersion, store));
    res.end();
    return;
  }
  // Replay and subscription happen in the same tick, so no change falls between them.
  for (const line of backlog) send(line);
  const unsubscribe = store.subscribe(typeKey(req.type), (c) => {
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
function lineWriter(
  res: ServerResponse,
  lines: SharedEventLines,
  render: WatchRequest['render'],
): (line: Line) => void {
  return (line) => {
    if (res.writableEnded) return;
    if (render && line.type !== 'ERROR' && line.type !== 'BOOKMARK') {
      res.write(`${JSON.stringify({ type: line.type, object: render(line.object as KubeObject) })}\n`);
    } else if (line.change) res.write(lines.lineOf(line.change, line.type));
    else res.write(lines.lineOfObject(line.type, line.object));
  };
}

/** The object with its type's apiVersion and kind; itself when it has them, as stored objects do. */
function stamp(req: WatchRequest, o: KubeObject): KubeObject {
  const apiVersion = apiVersionOf(req.type);
  if (o.apiVersion === apiVersion && o.kind === req.type.kind) return o;
  return { ...o, apiVersion, kind: req.type.kind };
}

/** A change's event as `type`: shareable when stamping left its object as it is. */
function changeLine(req: WatchRequest, type: EventType, c: Change): Line {
  const object = stamp(req, c.object);
  return object === c.object ? { type, object, change: c } : { type, object };
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
    if (c.type === 'ADDED') return now ? changeLine(req, 'ADDED', c) : undefined;
    if (c.type === 'DELETED') return before ? changeLine(req, 'DELETED', c) : undefined;
    if (now && before) return changeLine(req, 'MODIFIED', c);
    if (now) return changeLine(req, 'ADDED', c);
    if (before) return changeLine(req, 'DELETED', c);
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
      .map((o): Line => ({ type: 'ADDED', object: stamp(req, o) }));
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
