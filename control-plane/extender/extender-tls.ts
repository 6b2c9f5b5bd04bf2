/**
 * The extender's TLS: who kube-scheduler trusts, and whom the extender trusts.
 *
 * `self` mode keeps one Secret that every replica shares: a long-lived CA (`ca.crt`, `ca.key`) and
 * the scheduler's client certificate (`tls.crt`, `tls.key`), which the scheduler mounts (without
 * `ca.key`). Each replica serves the extender with its own certificate from that CA, so the
 * scheduler's `caFile` (read once at its start) stays valid across client and serving rotations;
 * the client certificate is re-issued before it expires and kube-scheduler re-reads it from the
 * mounted files. `files` mode takes all of it from cert-manager; `ephemeral` issues it in memory.
 */
import { X509Certificate } from 'node:crypto';
import {
  type CertificateSubject,
  ensureSecretData,
  findRenewalReason,
  issueCertificateAuthority,
  issueLeafCertificate,
  type PemSecretStore,
  readCertificateFiles,
  splitPemBundle,
} from '../../webhooks/certificates.js';

const DAY_MS = 24 * 60 * 60 * 1000;
/** The CA outlives many client certificates: re-issuing it means restarting the scheduler. */
const CA_VALIDITY_DAYS = 3650;

export const EXTENDER_SECRET_KEYS = ['ca.crt', 'ca.key', 'tls.crt', 'tls.key'] as const;
export type ExtenderSecretData = Record<(typeof EXTENDER_SECRET_KEYS)[number], string>;
export type ExtenderSecretStore = PemSecretStore<(typeof EXTENDER_SECRET_KEYS)[number]>;

/** What the extender's listener needs: its serving certificate and the CAs it trusts for clients. */
export type ExtenderListenerTls = { cert: string; key: string; ca: string };

/** What kube-scheduler mounts: its client certificate and the CA that verifies the extender. */
export type ExtenderClientCredentials = { certPem: string; keyPem: string; caPem: string };

export type ExtenderCertificateConfig = {
  mode: 'self' | 'files' | 'ephemeral';
  validityDays: number;
  rotateBeforeDays: number;
  certFile?: string | undefined;
  keyFile?: string | undefined;
  clientCaFile?: string | undefined;
};

type Lifetime = { validityDays: number; rotateBeforeDays: number };

function until(now: Date, days: number, cap?: string): Date {
  const wanted = now.getTime() + days * DAY_MS;
  return new Date(cap ? Math.min(wanted, new Date(new X509Certificate(cap).validTo).getTime()) : wanted);
}

/** Why the stored CA cannot be kept, or undefined. */
function caRenewalReason(data: Pick<ExtenderSecretData, 'ca.crt' | 'ca.key'>, rotateBeforeDays: number, now: Date) {
  return findRenewalReason(
    { certPem: data['ca.crt'], keyPem: data['ca.key'] },
    { dnsNames: [], ipAddresses: [] },
    rotateBeforeDays,
    now,
  );
}

/** Why the stored client certificate cannot be kept (its CA's reasons included), or undefined. */
export function clientRenewalReason(
  data: ExtenderSecretData,
  clientName: string,
  rotateBeforeDays: number,
  now: Date,
): string | undefined {
  const ca = caRenewalReason(data, rotateBeforeDays, now);
  if (ca) return `CA ${ca}`;
  const client = findRenewalReason(
    { certPem: data['tls.crt'], keyPem: data['tls.key'] },
    { dnsNames: [clientName], ipAddresses: [] },
    rotateBeforeDays,
    now,
  );
  if (client) return `client certificate ${client}`;
  const cert = new X509Certificate(data['tls.crt']);
  const ca2 = new X509Certificate(data['ca.crt']);
  return cert.checkIssued(ca2) && cert.verify(ca2.publicKey) ? undefined : 'client certificate not issued by the CA';
}

/** A client certificate for `clientName` from `ca`, ending no later than the CA. */
async function issueClient(ca: { certPem: string; keyPem: string }, clientName: string, lifetime: Lifetime, now: Date) {
  return issueLeafCertificate(
    ca,
    { commonName: clientName, dnsNames: [clientName], ipAddresses: [], usage: 'client' },
    now,
    until(now, lifetime.validityDays, ca.certPem),
  );
}

/** The Secret's next data: the stored CA while it is good, else a new one; a fresh client certificate. */
async function nextSecretData(
  current: Partial<ExtenderSecretData> | undefined,
  clientName: string,
  lifetime: Lifetime,
  now: Date,
): Promise<ExtenderSecretData> {
  const keep =
    current?.['ca.crt'] && current['ca.key']
      ? caRenewalReason({ 'ca.crt': current['ca.crt'], 'ca.key': current['ca.key'] }, lifetime.rotateBeforeDays, now)
      : 'absent';
  const ca =
    keep === undefined && current?.['ca.crt'] && current['ca.key']
      ? { certPem: current['ca.crt'], keyPem: current['ca.key'] }
      : await issueCertificateAuthority(`vcuda extender CA ${now.toISOString()}`, now, until(now, CA_VALIDITY_DAYS));
  const client = await issueClient(ca, clientName, lifetime, now);
  return { 'ca.crt': ca.certPem, 'ca.key': ca.keyPem, 'tls.crt': client.certPem, 'tls.key': client.keyPem };
}

/** Makes the shared Secret hold a good CA and a good client certificate; safe from every replica at once. */
export async function ensureExtenderSecret(
  store: ExtenderSecretStore,
  clientName: string,
  lifetime: Lifetime,
  now: Date,
) {
  return ensureSecretData(
    store,
    EXTENDER_SECRET_KEYS,
    (data) => clientRenewalReason(data, clientName, lifetime.rotateBeforeDays, now),
    (current) => nextSecretData(current, clientName, lifetime, now),
  );
}

/** This replica's serving certificate from the shared CA. */
export async function issueExtenderServing(
  ca: { certPem: string; keyPem: string },
  subject: CertificateSubject,
  lifetime: Lifetime,
  now: Date,
) {
  return issueLeafCertificate(ca, { ...subject, usage: 'server' }, now, until(now, lifetime.validityDays, ca.certPem));
}

/** Everything issued in memory (no cluster): the listener's TLS and the one client's credentials. */
export async function issueEphemeralExtenderTls(
  subject: CertificateSubject,
  clientName: string,
  lifetime: Lifetime,
  now: Date,
): Promise<{ listener: ExtenderListenerTls; client: ExtenderClientCredentials }> {
  const data = await nextSecretData(undefined, clientName, lifetime, now);
  const ca = { certPem: data['ca.crt'], keyPem: data['ca.key'] };
  const serving = await issueExtenderServing(ca, subject, lifetime, now);
  return {
    listener: { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem },
    client: { certPem: data['tls.crt'], keyPem: data['tls.key'], caPem: ca.certPem },
  };
}

/** Files mode: the supplied serving certificate and key (checked to match), and the client CA bundle. */
export function readExtenderTlsFiles(
  files: { certFile: string; keyFile: string; clientCaFile: string },
  readFile: (path: string) => string,
): ExtenderListenerTls {
  const serving = readCertificateFiles({ certFile: files.certFile, keyFile: files.keyFile }, readFile);
  const ca = splitPemBundle(readFile(files.clientCaFile)).join('');
  if (!ca) throw new Error(`extender.certificates.clientCaFile ${files.clientCaFile}: no PEM certificate in it`);
  return { cert: serving.certPem, key: serving.keyPem, ca };
}
