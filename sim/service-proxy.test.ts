/**
 * The Service proxy forwards bytes as they come, as kube-proxy's packet rewriting does: a backend's
 * answer in two small writes a moment apart (an h2 HEADERS frame, then DATA) is not held back by
 * Nagle's algorithm for the client's delayed ACK (40 ms on Linux).
 */
import net from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { type ServiceProxy, startServiceProxy } from './service-proxy.js';

let backend: net.Server | undefined;
let proxy: ServiceProxy | undefined;

afterAll(async () => {
  await proxy?.close();
  backend?.close();
});

it('passes a two-write answer through without a delayed-ACK wait', async () => {
  backend = net.createServer({ noDelay: true }, (socket) => {
    socket.on('data', () => {
      socket.write('h');
      setTimeout(() => socket.write('d'), 2);
    });
  });
  await new Promise<void>((r) => backend?.listen(0, '127.0.0.1', r));
  proxy = await startServiceProxy();
  proxy.setBackends([(backend.address() as net.AddressInfo).port]);
  const client = net.connect({ port: proxy.port, host: '127.0.0.1', noDelay: true });
  await new Promise((r) => client.once('connect', r));
  const rounds = 20;
  const start = performance.now();
  for (let i = 0; i < rounds; i++) {
    let got = '';
    const answered = new Promise<void>((r) => {
      const onData = (d: Buffer) => {
        got += d.toString();
        if (got.length >= 2) {
          client.off('data', onData);
          r();
        }
      };
      client.on('data', onData);
    });
    client.write('q');
    await answered;
  }
  const perRound = (performance.now() - start) / rounds;
  client.destroy();
  expect(perRound).toBeLessThan(20);
});
