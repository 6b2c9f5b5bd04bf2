import { describe, expect, it } from 'vitest';
import { storedPod } from '../../test/support/sim/pod-object.js';
import { ObjectStore } from './object-store.js';

const pod = storedPod;

describe('object store', () => {
  it('lists by namespace and name, one namespace without the others, as etcd orders keys', () => {
    const store = new ObjectStore();
    for (const [ns, name] of [
      ['b', 'x'],
      ['a', 'y'],
      ['a', 'x-2'],
      ['a', 'x'],
    ] as const)
      store.insert('/pods', pod(ns, name));
    const names = (ns?: string) => store.list('/pods', ns).map((o) => `${o.metadata.namespace}/${o.metadata.name}`);
    expect(names()).toEqual(['a/x', 'a/x-2', 'a/y', 'b/x']);
    expect(names('a')).toEqual(['a/x', 'a/x-2', 'a/y']);
    store.remove('/pods', 'a', 'x-2');
    store.insert('/pods', pod('a', 'w'));
    expect(names('a')).toEqual(['a/w', 'a/x', 'a/y']);
    expect(store.list('/nodes')).toEqual([]);
  });

  it('hands out frozen objects, so a reader cannot change what is stored or what a response was built from', () => {
    const store = new ObjectStore();
    const body = pod('a', 'p');
    const stored = store.insert('/pods', body);
    expect(stored).not.toBe(body);
    expect(store.get('/pods', 'a', 'p')).toBe(stored);
    expect(() => {
      (stored.metadata.labels as Record<string, string>)['app'] = 'other';
    }).toThrow(TypeError);
    expect(() => {
      (stored['status'] as Record<string, string>)['phase'] = 'Running';
    }).toThrow(TypeError);
    expect(store.get('/pods', 'a', 'p')?.metadata.labels).toEqual({ app: 'demo' });
  });

  it('encodes a stored object once, as JSON.stringify does, and not an object it no longer holds', () => {
    const store = new ObjectStore();
    const stored = store.insert('/pods', pod('a', 'p'));
    const bytes = store.jsonBytes(stored);
    expect(bytes.toString('utf8')).toBe(JSON.stringify(stored));
    expect(store.jsonBytes(stored)).toBe(bytes);
    const next = store.update('/pods', { ...stored, status: { phase: 'Running' } });
    expect(store.jsonBytes(next).toString('utf8')).toBe(JSON.stringify(next));
    expect(store.jsonBytes(stored)).not.toBe(bytes);
    expect(store.jsonBytes({ plain: 'é' }).toString('utf8')).toBe('{"plain":"é"}');
  });

  it('resumes from the bounded log and refuses a revision the log dropped', () => {
    const store = new ObjectStore(3);
    const revisions: number[] = [];
    store.subscribe('/pods', (c) => revisions.push(c.resourceVersion));
    for (let i = 0; i < 10; i++) store.insert(i % 2 ? '/pods' : '/configmaps', pod('a', `o${i}`));
    // Ten writes after revision 1: the last three (9, 10, 11) are kept.
    expect(store.oldestResumableRevision()).toBe(8);
    expect(store.changesSince('/pods', 7)).toBeUndefined();
    expect(store.changesSince('/pods', 8)?.map((c) => c.resourceVersion)).toEqual([9, 11]);
    expect(store.changesSince('/pods', 9)?.map((c) => c.resourceVersion)).toEqual([11]);
    expect(store.changesSince('/configmaps', 8)?.map((c) => c.object.metadata.name)).toEqual(['o8']);
    expect(revisions).toEqual([3, 5, 7, 9, 11]);
  });
});
