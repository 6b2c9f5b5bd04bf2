import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { issueCertificateAuthority, issueLeafCertificate } from '../webhooks/certificates.js';
import { PooledKubeConfig } from './pooled-kube-config.js';

const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default', uid: 'u' } };

type Counted = { url: string; connections: number; clientNames: string[]; close: () => Promise<void> };
const servers: Counted[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** An API server stand-in answering every GET with one pod, counting connections (TLS: handshakes and client CNs). */
async function countingServer(tls?: https.ServerOptions): Promise<Counted> {
  const answer: http.RequestListener = (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(pod));
  };
  const server = tls ? https.createServer(tls, answer) : http.createServer(answer);
  const counted: Counted = { url: '', connections: 0, clientNames: [], close: async () => {} };
  server.on(tls ? 'secureConnection' : 'connection', (socket) => {
    counted.connections++;
    if (tls) counted.clientNames.push(String((socket as TLSSocket).getPeerCertificate().subject?.CN));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  counted.url = `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  counted.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  servers.push(counted);
  return counted;
}

function plainConfig(kc: KubeConfig, server: string): KubeConfig {
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

async function readPodTimes(kc: KubeConfig, times: number): Promise<void> {
  const api = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < times; i++)
    expect((await api.readNamespacedPod({ name: 'p', namespace: 'default' })).metadata?.uid).toBe('u');
}

/**
 * A counting HTTPS server that demands a client certificate of its CA, and `useClient`, which
 * points `kc` at it with a fresh client certificate naming `commonName`.
 */
async function mutualTlsServer() {
  const now = new Date();
  const until = new Date(now.getTime() + 86_400_000);
  const ca = await issueCertificateAuthority('test-ca', now, until);
  const serving = await issueLeafCertificate(
    ca,
    { dnsNames: [], ipAddresses: ['127.0.0.1'], usage: 'server' },
    now,
    until,
  );
  const server = await countingServer({
    cert: serving.certPem,
    key: serving.keyPem,
    ca: ca.certPem,
    requestCert: true,
    rejectUnauthorized: true,
  });
  const b64 = (pem: string) => Buffer.from(pem).toString('base64');
  const useClient = async (kc: KubeConfig, commonName: string) => {
    const client = await issueLeafCertificate(
      ca,
      { commonName, dnsNames: [], ipAddresses: [], usage: 'client' },
      now,
      until,
    );
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: server.url, caData: b64(ca.certPem) }],
      users: [{ name: 'u', certData: b64(client.certPem), keyData: b64(client.keyPem) }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
  };
  return { server, useClient };
}

describe('PooledKubeConfig', () => {
  it('sends successive API calls over one connection, where the stock config opens one per call', async () => {
    const stock = await countingServer();
    await readPodTimes(plainConfig(new KubeConfig(), stock.url), 5);
    expect(stock.connections).toBe(5);

    const pooled = await countingServer();
    const kc = plainConfig(new PooledKubeConfig(), pooled.url) as PooledKubeConfig;
    await readPodTimes(kc, 5);
    expect(pooled.connections).toBe(1);
    kc.closeIdleConnections();
  });

  it('keeps one TLS session per client certificate: a rotated certificate opens a new one that presents it', async () => {
    const { server, useClient } = await mutualTlsServer();
    const kc = new PooledKubeConfig();
    await useClient(kc, 'first');
    await readPodTimes(kc, 4);
    expect(server.clientNames).toEqual(['first']);
    await useClient(kc, 'second');
    await readPodTimes(kc, 4);
    expect(server.clientNames).toEqual(['first', 'second']);
    kc.closeIdleConnections();
  });

  it('parses the TLS material once: concurrent calls over several connections share one secure context', async () => {
    const { server, useClient } = await mutualTlsServer();
    const kc = new PooledKubeConfig();
    await useClient(kc, 'shared');
    const api = kc.makeApiClient(CoreV1Api);
    // At once: the agent opens a connection per call in flight, each presenting the certificate.
    const pods = await Promise.all(
      Array.from({ length: 6 }, () => api.readNamespacedPod({ name: 'p', namespace: 'default' })),
    );
    expect(pods.map((p) => p.metadata?.uid)).toEqual(Array(6).fill('u'));
    expect(server.clientNames.length).toBeGreaterThan(1);
    expect(new Set(server.clientNames)).toEqual(new Set(['shared']));
    // What each connection is made from: one parsed context, no PEM left to parse again.
    const agents = [...(kc as unknown as { agents: Map<string, https.Agent> }).agents.values()];
    const options = (agents[0] as unknown as { options: Record<string, unknown> }).options;
    expect(agents).toHaveLength(1);
    expect(options.secureContext).toBeDefined();
    expect([options.ca, options.cert, options.key]).toEqual([undefined, undefined, undefined]);
    kc.closeIdleConnections();
  });
});
