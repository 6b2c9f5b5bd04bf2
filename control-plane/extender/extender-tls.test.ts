import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { memoryPemSecret } from '../../test/support/control-plane/memory-secret.js';
import { issueCertificateAuthority, issueLeafCertificate } from '../../webhooks/certificates.js';
import { clientRenewalReason, type EXTENDER_SECRET_KEYS, ensureExtenderSecret } from './extender-tls.js';

const DAY = 24 * 3600 * 1000;
const T0 = new Date('2026-11-22T00:00:00Z');
const lifetime = { validityDays: 365, rotateBeforeDays: 30 };

const secret = () => memoryPemSecret<(typeof EXTENDER_SECRET_KEYS)[number]>();

describe('ensureExtenderSecret', () => {
  it('creates a CA and a client certificate for the scheduler, once, however many replicas race', async () => {
    const s = secret();
    const outcomes = await Promise.all(
      [1, 2, 3].map(() => ensureExtenderSecret(s.store, 'vcuda-scheduler', lifetime, T0)),
    );
    expect(s.writes()).toBe(1);
    expect(new Set(outcomes.map((o) => o.data['tls.crt'])).size).toBe(1);
    const data = s.current() as Record<string, string>;
    const client = new X509Certificate(data['tls.crt'] as string);
    const ca = new X509Certificate(data['ca.crt'] as string);
    expect(client.checkIssued(ca) && client.verify(ca.publicKey)).toBe(true);
    expect(client.subject).toBe('CN=vcuda-scheduler');
    expect(client.subjectAltName).toBe('DNS:vcuda-scheduler');
    expect(client.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']); // clientAuth only
  });

  it('re-issues the client certificate before it expires, from the same CA (the scheduler’s caFile stays valid)', async () => {
    const s = secret();
    const first = await ensureExtenderSecret(s.store, 'vcuda-scheduler', lifetime, T0);
    const kept = await ensureExtenderSecret(s.store, 'vcuda-scheduler', lifetime, new Date(T0.getTime() + 300 * DAY));
    expect(kept.action).toBe('kept');
    const rotated = await ensureExtenderSecret(
      s.store,
      'vcuda-scheduler',
      lifetime,
      new Date(T0.getTime() + 340 * DAY),
    );
    expect(rotated.action).toBe('rotated');
    expect(rotated.reason).toMatch(/^client certificate expires/);
    expect(rotated.data['ca.crt']).toBe(first.data['ca.crt']);
    expect(rotated.data['tls.crt']).not.toBe(first.data['tls.crt']);
  });

  it('replaces a client certificate another CA issued, or one for another name', async () => {
    const s = secret();
    const good = await ensureExtenderSecret(s.store, 'vcuda-scheduler', lifetime, T0);
    const other = await issueCertificateAuthority('other', T0, new Date(T0.getTime() + 400 * DAY));
    const foreign = await issueLeafCertificate(
      other,
      { commonName: 'vcuda-scheduler', dnsNames: ['vcuda-scheduler'], ipAddresses: [], usage: 'client' },
      T0,
      new Date(T0.getTime() + 365 * DAY),
    );
    const forged = { ...good.data, 'tls.crt': foreign.certPem, 'tls.key': foreign.keyPem };
    expect(clientRenewalReason(forged, 'vcuda-scheduler', 30, T0)).toBe('client certificate not issued by the CA');
    expect(clientRenewalReason(good.data, 'someone-else', 30, T0)).toBe(
      'client certificate does not cover someone-else',
    );
  });
});
