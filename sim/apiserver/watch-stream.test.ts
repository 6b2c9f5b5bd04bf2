import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { storedPod } from '../../test/support/sim/pod-object.js';
import { type Change, ObjectStore } from './object-store.js';
import { findResourceType } from './resource-registry.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import { SharedEventLines, serveWatch, type WatchRequest } from './watch-stream.js';

const POD = findResourceType('', 'v1', 'pods')!;

const pod = storedPod;

/** A watch response that keeps every chunk it is given, as the socket would queue it. */
function recordingResponse() {
  const chunks: Buffer[] = [];
  const res = {
    writableEnded: false,
    writeHead: () => res,
    flushHeaders: () => undefined,
    write: (chunk: Buffer | string) => chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk)),
    end: () => {
      res.writableEnded = true;
    },
    on: () => res,
  };
  return { res: res as unknown as ServerResponse, chunks };
}

function watch(store: ObjectStore, lines: SharedEventLines, req: Partial<WatchRequest> = {}) {
  const { res, chunks } = recordingResponse();
  const request: WatchRequest = {
    type: POD,
    match: () => true,
    resourceVersion: String(store.currentRevision()),
    allowBookmarks: false,
    bookmarkIntervalMs: 1000,
    ...req,
  };
  serveWatch(store, lines, request, res, () => undefined);
  return chunks;
}

const text = (chunks: Buffer[]) => chunks.map((c) => c.toString('utf8'));

describe('watch events shared between watches', () => {
  it('sends every watch of a change the same bytes, each event as JSON.stringify would write it', () => {
    const store = new ObjectStore();
    const lines = new SharedEventLines(store);
    const first = watch(store, lines);
    const second = watch(store, lines, { match: parseLabelSelector('app=demo') });
    const stored = store.insert('/pods', pod('a', 'p'));
    expect(first).toHaveLength(1);
    expect(second[0]).toBe(first[0]);
    expect(first[0]!.toString('utf8')).toBe(`${JSON.stringify({ type: 'ADDED', object: stored })}\n`);
  });

  it("gives each watch its own view of one change: the selectors decide the event's type, never its object", () => {
    const store = new ObjectStore();
    const lines = new SharedEventLines(store);
    const stored = store.insert('/pods', pod('a', 'p'));
    const all = watch(store, lines);
    const pending = watch(store, lines, { match: parseFieldSelector('status.phase=Pending') });
    const running = watch(store, lines, { match: parseFieldSelector('status.phase=Running') });
    const otherNode = watch(store, lines, { match: parseFieldSelector('spec.nodeName=n2') });
    const table = watch(store, lines, { render: (o) => ({ kind: 'Table', rows: [o.metadata.name] }) });
    const next = store.update('/pods', { ...stored, status: { phase: 'Running' } });
    const as = (type: string) => `${JSON.stringify({ type, object: next })}\n`;
    expect(text(all)).toEqual([as('MODIFIED')]);
    expect(text(pending)).toEqual([as('DELETED')]);
    expect(text(running)).toEqual([as('ADDED')]);
    expect(otherNode).toEqual([]);
    expect(text(table)).toEqual([`${JSON.stringify({ type: 'MODIFIED', object: { kind: 'Table', rows: ['p'] } })}\n`]);
  });

  it('keeps the bytes a watch was sent when the object changes again, and reports a removal with its own revision', () => {
    const store = new ObjectStore();
    const lines = new SharedEventLines(store);
    const stored = store.insert('/pods', pod('a', 'p'));
    const sent = watch(store, lines, { match: parseFieldSelector('spec.nodeName=n1') });
    store.update('/pods', { ...stored, metadata: { ...stored.metadata, labels: { app: 'v2' } } });
    const firstCopy = Buffer.from(sent[0]!);
    store.update('/pods', { ...stored, metadata: { ...stored.metadata, labels: { app: 'v3' } } });
    store.remove('/pods', 'a', 'p');
    expect(sent[0]!.equals(firstCopy)).toBe(true);
    const events = text(sent).map((l) => JSON.parse(l) as { type: string; object: Change['object'] });
    expect(events.map((e) => [e.type, e.object.metadata.labels?.['app'], e.object.metadata.resourceVersion])).toEqual([
      ['MODIFIED', 'v2', '3'],
      ['MODIFIED', 'v3', '4'],
      ['DELETED', 'v3', '5'],
    ]);
  });

  it('replays the log to a watch that resumes, sharing nothing it should not', () => {
    const store = new ObjectStore();
    const lines = new SharedEventLines(store);
    const from = String(store.currentRevision());
    const a = store.insert('/pods', pod('a', 'p'));
    store.insert('/pods', pod('b', 'q'));
    const live = watch(store, lines);
    const replayed = watch(store, lines, { resourceVersion: from, namespace: 'a' });
    expect(text(replayed)).toEqual([`${JSON.stringify({ type: 'ADDED', object: a })}\n`]);
    expect(live).toEqual([]);
  });
});
