import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import * as tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import {
  type CertificateSecretData,
  type CertificateSecretStore,
  ensureServingCertificate,
  findRenewalReason,
  issueServingCertificate,
  readCertificateFiles,
  SecretConflictError,
  serviceDnsNames,
  splitPemBundle,
} from './certificates.js';

const DAY = 24 * 3600 * 1000;
const T0 = new Date('2026-11-22T00:00:00Z');
const subject = {
  dnsNames: serviceDnsNames({ name: 'vcuda-control-plane', namespace: 'vcuda-system' }),
  ipAddresses: [],
};
const loopback = { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] };
const lifetime = { validityDays: 365, rotateBeforeDays: 30 };

/** A Secret in memory with the API server's optimistic concurrency. */
function memorySecret() {
  let stored: { data: CertificateSecretData; resourceVersion: string } | undefined;
  let version = 0;
  let writes = 0;
  const store: CertificateSecretStore = {
    description: 'Secret vcuda-system/vcuda-webhook-tls',
    async read() {
      return stored && structuredClone(stored);
    },
    async create(data) {
      if (stored) throw new SecretConflictError(this.description);
      writes++;
      stored = { data, resourceVersion: String(++version) };
    },
    async replace(data, resourceVersion) {
      if (stored?.resourceVersion !== resourceVersion) throw new SecretConflictError(this.description);
      writes++;
      stored = { data, resourceVersion: String(++version) };
    },
  };
  return { store, writes: () => writes, current: () => stored };
}

/** A real TLS handshake against the certificate, trusting only the bundle. */
async function handshake(cert: { certPem: string; keyPem: string }, caBundlePem: string, servername: string) {
  const server = tls.createServer({ cert: cert.certPem, key: cert.keyPem }, (s) => s.end('ok'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  try {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: caBundlePem, servername });
    return await new Promise<string>((resolve, reject) => {
      socket.once('secureConnect', () => resolve('trusted'));
      socket.once('error', (err) => resolve(`refused: ${(err as NodeJS.ErrnoException).code ?? err.message}`));
      setTimeout(() => reject(new Error('no handshake')), 5000).unref();
    }).finally(() => socket.destroy());
  } finally {
    server.close();
  }
}

describe('issueServingCertificate', () => {
  it('issues a serving certificate for the Service names, signed by its own CA', async () => {
    const issued = await issueServingCertificate(subject, 365, new Date());
    const leaf = new X509Certificate(issued.certPem);
    const ca = new X509Certificate(issued.caPem);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(ca.ca).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.subjectAltName).toContain('DNS:vcuda-control-plane.vcuda-system.svc');
    expect(leaf.checkIssued(ca)).toBe(true);
    expect(await handshake(issued, issued.caPem, 'vcuda-control-plane.vcuda-system.svc')).toBe('trusted');
    // Another name, or another CA, is refused by a real TLS client.
    expect(await handshake(issued, issued.caPem, 'evil.example.com')).toMatch(/^refused/);
    const other = await issueServingCertificate(subject, 365, new Date());
    expect(await handshake(issued, other.caPem, 'vcuda-control-plane.vcuda-system.svc')).toMatch(/^refused/);
  });

  it('covers IP addresses for a control plane outside the cluster', async () => {
    const issued = await issueServingCertificate(loopback, 30, new Date());
    expect(new X509Certificate(issued.certPem).subjectAltName).toContain('IP Address:127.0.0.1');
  });
});

describe('findRenewalReason', () => {
  it('keeps a fresh certificate and renews inside the rotation window', async () => {
    const issued = await issueServingCertificate(subject, 365, T0);
    expect(findRenewalReason(issued, subject, 30, T0)).toBeUndefined();
    expect(findRenewalReason(issued, subject, 30, new Date(T0.getTime() + 334 * DAY))).toBeUndefined();
    expect(findRenewalReason(issued, subject, 30, new Date(T0.getTime() + 336 * DAY))).toMatch(/^expires/);
    expect(findRenewalReason(issued, subject, 30, new Date(T0.getTime() - 2 * DAY))).toBe('not valid yet');
  });

  it('renews when the key does not match, the PEM is garbage, or a name is missing', async () => {
    const a = await issueServingCertificate(subject, 365, T0);
    const b = await issueServingCertificate(subject, 365, T0);
    expect(findRenewalReason({ certPem: a.certPem, keyPem: b.keyPem }, subject, 30, T0)).toBe(
      'the key does not match the certificate',
    );
    expect(findRenewalReason({ certPem: 'nope', keyPem: a.keyPem }, subject, 30, T0)).toMatch(/^unreadable/);
    const moved = { dnsNames: serviceDnsNames({ name: 'vcuda', namespace: 'gpu' }), ipAddresses: [] };
    expect(findRenewalReason(a, moved, 30, T0)).toMatch(/^does not cover vcuda,/);
  });
});

describe('ensureServingCertificate', () => {
  it('creates the Secret once, then every replica keeps it', async () => {
    const secret = memorySecret();
    const first = await ensureServingCertificate(secret.store, subject, lifetime, T0);
    expect(first.action).toBe('created');
    const second = await ensureServingCertificate(secret.store, subject, lifetime, new Date(T0.getTime() + DAY));
    expect(second.action).toBe('kept');
    expect(second.certPem).toBe(first.certPem);
    expect(secret.writes()).toBe(1);
  });

  it('replicas racing at start-up end with one certificate', async () => {
    const secret = memorySecret();
    const results = await Promise.all(
      [1, 2, 3].map(() => ensureServingCertificate(secret.store, subject, lifetime, T0)),
    );
    expect(new Set(results.map((r) => r.certPem)).size).toBe(1);
    expect(results.filter((r) => r.action === 'created')).toHaveLength(1);
    expect(results[0]?.certPem).toBe(secret.current()?.data['tls.crt']);
  });

  it('rotates before expiry and keeps the previous CA in the bundle while it is valid', async () => {
    const secret = memorySecret();
    const old = await ensureServingCertificate(secret.store, subject, lifetime, T0);
    const later = new Date(T0.getTime() + 340 * DAY);
    const next = await ensureServingCertificate(secret.store, subject, lifetime, later);
    expect(next.action).toBe('rotated');
    expect(next.reason).toMatch(/^expires/);
    expect(next.certPem).not.toBe(old.certPem);
    const bundle = splitPemBundle(next.caBundlePem);
    expect(bundle).toHaveLength(2);
    // Both the new and a not-yet-reloaded replica's old certificate are trusted by the bundle.
    const newLeaf = new X509Certificate(next.certPem);
    const oldLeaf = new X509Certificate(old.certPem);
    expect(bundle.map((pem) => newLeaf.checkIssued(new X509Certificate(pem)))).toEqual([true, false]);
    expect(bundle.map((pem) => oldLeaf.checkIssued(new X509Certificate(pem)))).toEqual([false, true]);
    // A year later the old CA has expired and is dropped.
    const much = await ensureServingCertificate(secret.store, subject, lifetime, new Date(later.getTime() + 340 * DAY));
    expect(much.action).toBe('rotated');
    expect(splitPemBundle(much.caBundlePem)).toHaveLength(2);
    expect(much.caBundlePem).not.toContain(bundle[1]?.trim());
  });

  it('after a rotation, a real TLS client trusting the bundle accepts both the new and the old certificate', async () => {
    const secret = memorySecret();
    // Issued 340 days ago so both certificates are valid for a TLS client today.
    const old = await ensureServingCertificate(secret.store, subject, lifetime, new Date(Date.now() - 340 * DAY));
    const next = await ensureServingCertificate(secret.store, subject, lifetime, new Date());
    expect(next.action).toBe('rotated');
    const name = 'vcuda-control-plane.vcuda-system.svc';
    expect(await handshake(next, next.caBundlePem, name)).toBe('trusted');
    expect(await handshake(old, next.caBundlePem, name)).toBe('trusted');
    expect(await handshake(next, old.caBundlePem, name)).toMatch(/^refused/);
  });

  it('repairs a Secret that lacks a key', async () => {
    const secret = memorySecret();
    await secret.store.create({ 'tls.crt': 'x', 'tls.key': '', 'ca.crt': '' });
    const out = await ensureServingCertificate(secret.store, subject, lifetime, T0);
    expect(out.action).toBe('rotated');
    expect(out.reason).toBe('the Secret lacks tls.crt, tls.key or ca.crt');
  });

  it('gives up with a clear error when the Secret never settles', async () => {
    const store: CertificateSecretStore = {
      description: 'Secret a/b',
      read: async () => undefined,
      create: async () => {
        throw new SecretConflictError('Secret a/b');
      },
      replace: async () => {},
    };
    await expect(ensureServingCertificate(store, subject, lifetime, T0)).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining('Secret a/b kept changing'),
    });
  });
});

describe('readCertificateFiles', () => {
  it('reads a supplied certificate, key and CA and checks they belong together', async () => {
    const a = await issueServingCertificate(loopback, 30, new Date());
    const b = await issueServingCertificate(loopback, 30, new Date());
    const files: Record<string, string> = {
      '/c': a.certPem,
      '/k': a.keyPem,
      '/ca': a.caPem,
      '/bk': b.keyPem,
      '/x': 'junk',
    };
    const read = (p: string) => {
      const v = files[p];
      if (v === undefined) throw new Error(`ENOENT ${p}`);
      return v;
    };
    const ok = readCertificateFiles({ certFile: '/c', keyFile: '/k', caFile: '/ca' }, read);
    expect(ok.caBundlePem).toBe(a.caPem);
    // Two CAs glued END-to-BEGIN (as `cat` of files without a final newline makes) come back one per line.
    files['/glued'] = `${a.caPem.trim()}${b.caPem.trim()}`;
    const glued = readCertificateFiles({ certFile: '/c', keyFile: '/k', caFile: '/glued' }, read);
    expect(glued.caBundlePem).toBe(`${a.caPem}${b.caPem}`);
    expect(() => readCertificateFiles({ certFile: '/c', keyFile: '/bk' }, read)).toThrow('does not match');
    expect(() => readCertificateFiles({ certFile: '/x', keyFile: '/k' }, read)).toThrow('not a PEM certificate');
    expect(() => readCertificateFiles({ certFile: '/c', keyFile: '/x' }, read)).toThrow('not a PEM private key');
    expect(() => readCertificateFiles({ certFile: '/c', keyFile: '/k', caFile: '/x' }, read)).toThrow(
      'no PEM certificate',
    );
  });
});
