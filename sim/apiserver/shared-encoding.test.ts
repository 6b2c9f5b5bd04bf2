import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KubeClient, podPath } from '../kube-client.js';
import { type SimApiServer, startApiServer } from './api-server.js';

const pod = (name: string, nodeName?: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels: { app: 'demo' } },
  spec: {
    ...(nodeName ? { nodeName } : {}),
    containers: [{ name: 'c', image: 'busybox:1', resources: { limits: { cpu: '1' } } }],
  },
});

async function send(base: string, method: string, path: string, body?: unknown, contentType = 'application/json') {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': contentType },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, text: await res.text() };
}

/** A watch's raw lines, as its client receives them. */
async function openWatch(url: string) {
  const ctl = new AbortController();
  const res = await fetch(url, { signal: ctl.signal });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const lines: string[] = [];
  let rest = '';
  return {
    close: () => ctl.abort(),
    async next(count: number): Promise<string[]> {
      while (lines.length < count) {
        const { value, done } = await reader.read();
        if (done) break;
        const parts = (rest + value).split('\n');
        rest = parts.pop()!;
        lines.push(...parts.filter(Boolean));
      }
      return lines.slice(0, count);
    },
  };
}

describe('responses and watch events built from shared encodings', () => {
  let api: SimApiServer;
  let client: KubeClient;
  beforeEach(async () => {
    api = await startApiServer({ namespaces: ['team-a'] });
    client = new KubeClient(api.url);
  });
  afterEach(async () => api.close());

  it("sends watches the same bytes as the write's response, each typed by its own selectors", async () => {
    await client.create(podPath('team-a'), pod('p', 'n1'));
    const rv = (await client.list('/api/v1/pods')).metadata.resourceVersion;
    const at = `${api.url}/api/v1/pods?watch=1&resourceVersion=${rv}`;
    const all = await openWatch(at);
    const onNode = await openWatch(`${at}&fieldSelector=spec.nodeName%3Dn1`);
    const demo = await openWatch(`${at}&labelSelector=app%3Ddemo`);
    const patch = { metadata: { labels: { app: 'other' } } };
    const patched = await send(api.url, 'PATCH', podPath('team-a', 'p'), patch, 'application/merge-patch+json');
    expect(patched.status).toBe(200);
    const [allLine] = await all.next(1);
    const [nodeLine] = await onNode.next(1);
    const [demoLine] = await demo.next(1);
    for (const w of [all, onNode, demo]) w.close();
    expect(allLine).toBe(`{"type":"MODIFIED","object":${patched.text}}`);
    expect(nodeLine).toBe(allLine);
    // The label selector no longer matches: DELETED, carrying the object as it is now.
    expect(demoLine).toBe(`{"type":"DELETED","object":${patched.text}}`);
    expect(JSON.parse(patched.text)).toEqual(await client.get(podPath('team-a', 'p')));
  });

  it('lists, gets and deletes collections with the bytes JSON.stringify would write', async () => {
    for (const name of ['b', 'a', 'c']) await client.create(podPath('team-a'), pod(name));
    const list = await send(api.url, 'GET', '/api/v1/namespaces/team-a/pods?labelSelector=app%3Ddemo');
    const parsed = JSON.parse(list.text) as { items: { metadata: { name: string } }[] };
    expect(list.text).toBe(JSON.stringify(parsed));
    expect(parsed.items.map((p) => p.metadata.name)).toEqual(['a', 'b', 'c']);
    const one = await send(api.url, 'GET', podPath('team-a', 'b'));
    expect(JSON.parse(one.text)).toEqual(parsed.items[1]);
    const empty = await send(api.url, 'GET', '/api/v1/namespaces/default/pods');
    expect(JSON.parse(empty.text)).toMatchObject({ kind: 'PodList', items: [] });
    const deleted = await send(api.url, 'DELETE', '/api/v1/namespaces/team-a/pods');
    expect(JSON.parse(deleted.text)).toEqual(parsed);
    expect((await client.list(podPath('team-a'))).items).toEqual([]);
  });

  it('changes a stored pod only through new objects: status, spec rules, graceful deletion', async () => {
    await client.create(podPath('team-a'), pod('p', 'n1'));
    const status = await send(
      api.url,
      'PATCH',
      `${podPath('team-a', 'p')}/status`,
      { status: { phase: 'Running' } },
      'application/merge-patch+json',
    );
    expect(JSON.parse(status.text)).toMatchObject({ metadata: { name: 'p' }, status: { phase: 'Running' } });
    const image = { spec: { containers: [{ name: 'c', image: 'busybox:2' }] } };
    const newImage = await send(
      api.url,
      'PATCH',
      podPath('team-a', 'p'),
      image,
      'application/strategic-merge-patch+json',
    );
    expect(newImage.status).toBe(200);
    expect(JSON.parse(newImage.text).spec.containers[0]).toMatchObject({ image: 'busybox:2', resources: {} });
    const cpu = { spec: { containers: [{ name: 'c', resources: { limits: { cpu: '2' } } }] } };
    const refused = await send(api.url, 'PATCH', podPath('team-a', 'p'), cpu, 'application/strategic-merge-patch+json');
    expect(refused.status).toBe(422);
    expect(refused.text).toContain('pod updates may not change fields other than');
    const marked = await send(api.url, 'DELETE', podPath('team-a', 'p'));
    expect(JSON.parse(marked.text).metadata).toMatchObject({ deletionGracePeriodSeconds: 30 });
    const stored = await client.get(podPath('team-a', 'p'));
    expect(stored.metadata['deletionTimestamp']).toBeTruthy();
    expect((stored['status'] as { phase: string }).phase).toBe('Running');
  });
});
