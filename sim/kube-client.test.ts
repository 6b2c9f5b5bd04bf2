import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeClient } from './kube-client.js';

/**
 * A server that closes a kept-alive connection as the next call on it arrives, unanswered: what a
 * server whose idle timeout fires at that moment does.
 */
async function serverClosingReusedConnections() {
  const seen = new WeakMap<object, number>();
  const calls: string[] = [];
  const server = http.createServer((req, res) => {
    const n = (seen.get(req.socket) ?? 0) + 1;
    seen.set(req.socket, n);
    calls.push(`${req.method} #${n}`);
    if (n > 1) {
      req.socket.destroy();
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ metadata: { name: 'p' } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, calls, url: `http://127.0.0.1:${port}` };
}

describe('KubeClient on keep-alive connections', () => {
  let close: () => Promise<void> = async () => undefined;
  afterEach(() => close());

  it('sends a call again on a fresh connection when the server closed the reused one unanswered', async () => {
    const s = await serverClosingReusedConnections();
    close = () => new Promise((resolve) => s.server.close(() => resolve()));
    const client = new KubeClient(s.url);
    await client.request('GET', '/api/v1/pods');
    const obj = await client.request('DELETE', '/api/v1/namespaces/d/pods/p', { kind: 'DeleteOptions' });
    expect(obj.metadata.name).toBe('p');
    expect(s.calls).toEqual(['GET #1', 'DELETE #2', 'DELETE #1']);
  });

  it('does not repeat a POST: the server may have created the object', async () => {
    const s = await serverClosingReusedConnections();
    close = () => new Promise((resolve) => s.server.close(() => resolve()));
    const client = new KubeClient(s.url);
    await client.request('GET', '/api/v1/pods');
    await expect(client.request('POST', '/api/v1/namespaces/d/pods', { metadata: { name: 'p' } })).rejects.toThrow(
      /reused keep-alive connection, closed by the server/,
    );
    expect(s.calls).toEqual(['GET #1', 'POST #2']);
  });
});
