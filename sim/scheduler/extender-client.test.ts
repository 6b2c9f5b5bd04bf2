/**
 * The simulated scheduler talks to an extender as kube-scheduler does: over TLS with the client
 * certificate and CA of the extender's `tlsConfig`, checking the server against `serverName`.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCertificateAuthority, issueLeafCertificate, serviceDnsNames } from '../../webhooks/certificates.js';
import { callBind } from './extender-client.js';
import { ExtenderTransport } from './extender-transport.js';
import { type ExtenderConfig, loadSchedulerConfig } from './scheduler-config.js';

const now = new Date();
const until = new Date(now.getTime() + 86_400_000);
const SHIPPED = new URL('../../deploy/scheduler/kube-scheduler-config.yaml', import.meta.url).pathname;
let server: Server;
let port: number;
let mountDir: string;
const seen: string[] = [];
let handshakes = 0;

beforeAll(async () => {
  const ca = await issueCertificateAuthority('test extender CA', now, until);
  const serving = await issueLeafCertificate(
    ca,
    {
      dnsNames: serviceDnsNames({ name: 'vcuda-control-plane', namespace: 'vcuda-system' }),
      ipAddresses: [],
      usage: 'server',
    },
    now,
    until,
  );
  const client = await issueLeafCertificate(
    ca,
    { commonName: 'vcuda-scheduler', dnsNames: ['vcuda-scheduler'], ipAddresses: [], usage: 'client' },
    now,
    until,
  );
  // What the scheduler's Secret volume holds.
  mountDir = mkdtempSync(join(tmpdir(), 'vcuda-sched-tls-'));
  mkdirSync(mountDir, { recursive: true });
  writeFileSync(join(mountDir, 'tls.crt'), client.certPem);
  writeFileSync(join(mountDir, 'tls.key'), client.keyPem);
  writeFileSync(join(mountDir, 'ca.crt'), ca.certPem);
  server = createServer(
    { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
    (req, res) => {
      seen.push(`${req.url} ${(req.socket as TLSSocket).getPeerCertificate().subject.CN}`);
      req.resume();
      res.setHeader('content-type', 'application/json');
      res.end('{"Error":""}');
    },
  );
  server.on('secureConnection', () => {
    handshakes += 1;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});

afterAll(() => {
  server?.close();
});

const pod = { metadata: { name: 'p', namespace: 'default', uid: 'u1' }, spec: { containers: [] } };

describe('extender calls over TLS', () => {
  it('binds with the shipped tlsConfig: client certificate from the mounted Secret, server checked by its Service name', async () => {
    const cfg = await loadSchedulerConfig(SHIPPED, `https://127.0.0.1:${port}`, {
      '/etc/vcuda-scheduler-tls': mountDir,
    });
    const ext = cfg.extenders[0] as ExtenderConfig;
    expect(ext.tlsConfig?.serverName).toBe('vcuda-control-plane.vcuda-system.svc');
    await callBind(ext, pod, 'n1');
    expect(seen).toEqual(['/scheduler/bind vcuda-scheduler']);
  });

  it('fails without the client certificate, and when the server does not match the CA', async () => {
    const cfg = await loadSchedulerConfig(SHIPPED, `https://127.0.0.1:${port}`, {
      '/etc/vcuda-scheduler-tls': mountDir,
    });
    const ext = cfg.extenders[0] as ExtenderConfig;
    const tls = ext.tlsConfig as NonNullable<ExtenderConfig['tlsConfig']>;
    await expect(callBind({ ...ext, tlsConfig: { ...tls, certFile: '', keyFile: '' } }, pod, 'n1')).rejects.toThrow();
    await expect(
      callBind({ ...ext, tlsConfig: { ...tls, serverName: 'elsewhere.example' } }, pod, 'n1'),
    ).rejects.toThrow(/elsewhere\.example/);
    expect(seen).toHaveLength(1);
  });

  it('keeps its connection alive across calls, as the transport of kube-scheduler does', async () => {
    const cfg = await loadSchedulerConfig(SHIPPED, `https://127.0.0.1:${port}`, {
      '/etc/vcuda-scheduler-tls': mountDir,
    });
    const ext = cfg.extenders[0] as ExtenderConfig;
    const transport = new ExtenderTransport();
    try {
      const before = handshakes;
      for (let i = 0; i < 3; i++) await callBind(ext, pod, 'n1', transport);
      expect(handshakes - before).toBe(1);
    } finally {
      transport.close();
    }
  });
});
