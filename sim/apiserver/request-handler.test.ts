import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KubeClient, podPath } from '../kube-client.js';
import { type SimApiServer, startApiServer } from './api-server.js';

const pod = (name: string, labels: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { nodeName: 'n1', containers: [{ name: 'main', image: 'busybox:1' }] },
});

describe('simulated API server requests', () => {
  let api: SimApiServer;
  let client: KubeClient;
  beforeEach(async () => {
    api = await startApiServer({
      namespaces: ['team-a'],
      bookmarkIntervalMs: 20,
      tokens: { 'agent-token': { username: 'agent', groups: ['system:serviceaccounts'] } },
      podLog: (p, container) => (p.metadata.name === 'chatty' ? `${container}: one\ntwo\nthree\n` : undefined),
    });
    client = new KubeClient(api.url);
  });
  afterEach(async () => api.close());

  it('reviews a known bearer token as its user and refuses any other', async () => {
    const review = async (token: string) => {
      const res = await fetch(`${api.url}/apis/authentication.k8s.io/v1/tokenreviews`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ spec: { token } }),
      });
      return { code: res.status, body: (await res.json()) as { kind: string; status: Record<string, unknown> } };
    };
    expect(await review('agent-token')).toEqual({
      code: 201,
      body: expect.objectContaining({
        kind: 'TokenReview',
        status: { authenticated: true, user: { username: 'agent', groups: ['system:serviceaccounts'] } },
      }),
    });
    expect((await review('forged')).body.status).toEqual({ authenticated: false, error: 'invalid bearer token' });
  });

  it('serves a pod log, its last lines, and refuses a pod whose log is not available', async () => {
    await client.create(podPath('team-a'), pod('chatty', {}));
    await client.create(podPath('team-a'), pod('quiet', {}));
    const log = async (name: string, query: string) => {
      const res = await fetch(`${api.url}${podPath('team-a', name)}/log${query}`);
      return { code: res.status, text: await res.text() };
    };
    expect(await log('chatty', '?container=main')).toEqual({ code: 200, text: 'main: one\ntwo\nthree\n' });
    expect(await log('chatty', '?tailLines=2')).toEqual({ code: 200, text: 'two\nthree\n' });
    const quiet = await log('quiet', '');
    expect(quiet.code).toBe(400);
    expect(JSON.parse(quiet.text).message).toBe('container logs of pod "quiet" are not available');
  });

  it('deletes the objects of a collection that match its selector and answers with them', async () => {
    await client.create(podPath('team-a'), pod('a', { app: 'x' }));
    await client.create(podPath('team-a'), pod('b', { app: 'y' }));
    const res = await fetch(`${api.url}${podPath('team-a')}?labelSelector=app%3Dx&gracePeriodSeconds=0`, {
      method: 'DELETE',
    });
    expect(res.status).toBe(200);
    const deleted = (await res.json()) as { items: { metadata: { name: string } }[] };
    expect(deleted.items.map((p) => p.metadata.name)).toEqual(['a']);
    const left = await client.list(podPath('team-a'));
    expect(left.items.map((p) => p.metadata.name)).toEqual(['b']);
  });

  it('answers 405 for a verb a path does not take, and 404 for a path it does not know', async () => {
    const put = await fetch(`${api.url}${podPath('team-a')}`, { method: 'PUT', body: '{}' });
    expect(put.status).toBe(405);
    expect(((await put.json()) as { message: string }).message).toBe(
      'PUT is not supported on /api/v1/namespaces/team-a/pods',
    );
    const unknown = await fetch(`${api.url}/api/v1/widgets`);
    expect(unknown.status).toBe(404);
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200);
  });

  it('sends bookmarks with the current revision to a watch that allows them, and ends it at its timeout', async () => {
    const res = await fetch(`${api.url}${podPath('team-a')}?watch=1&allowWatchBookmarks=true&timeoutSeconds=1`);
    const lines = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThan(1);
    expect(lines[0]).toMatchObject({
      type: 'BOOKMARK',
      object: { kind: 'Pod', metadata: { resourceVersion: expect.any(String) } },
    });
  });
});
