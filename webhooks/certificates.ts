/**
 * The webhook's serving certificate. Self-issued mode: a small CA and a serving certificate made
 * with @peculiar/x509, kept in one Secret that every control-plane replica shares (the first to
 * start creates it, the others adopt it; optimistic concurrency settles races) and re-issued
 * before it expires. The caBundle keeps the previous CA until it expires, so replicas still
 * serving the old certificate stay trusted while they reload. Files mode: certificates supplied
 * by cert-manager or an operator, re-read on every check.
 */
// @peculiar/x509 resolves its ASN.1 helpers through tsyringe, which needs the Reflect metadata API.
import 'reflect-metadata';
import { createPrivateKey, X509Certificate as NodeX509, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { messageOf, VcudaError } from '../contract/index.js';
import { joinPemBundle, splitPemBundle } from './pem-bundle.js';

export { joinPemBundle, splitPemBundle };

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 60 * 60 * 1000;
// Replicas' and the API server's clocks differ a little: start validity an hour early.
const SKEW_MS = 60 * 60 * 1000;

export type ServingCertificate = {
  certPem: string;
  keyPem: string;
  /** PEM bundle for the webhook configurations' caBundle: the current CA first. */
  caBundlePem: string;
  notAfter: Date;
};

/** Where the certificate must be valid: the Service's DNS names, or the loopback address. */
export type CertificateSubject = { dnsNames: readonly string[]; ipAddresses: readonly string[] };

export type CertificateLifetime = { validityDays: number; rotateBeforeDays: number };

/** The DNS names the API server uses to reach a Service. */
export function serviceDnsNames(service: { name: string; namespace: string }): string[] {
  const { name, namespace } = service;
  return [name, `${name}.${namespace}`, `${name}.${namespace}.svc`, `${name}.${namespace}.svc.cluster.local`];
}

async function keyPem(key: webcrypto.CryptoKey): Promise<string> {
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(pkcs8, 'PRIVATE KEY');
}

async function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
}

/** A certificate and its private key, PEM. */
export type IssuedCertificate = { certPem: string; keyPem: string; notAfter: Date };

/** What a leaf certificate is for: a TLS server (`serverAuth`) or a TLS client (`clientAuth`). */
export type LeafProfile = CertificateSubject & { commonName?: string; usage: 'server' | 'client' };

/** A self-signed CA, valid from `now` (less the clock skew) until `notAfter`. */
export async function issueCertificateAuthority(
  commonName: string,
  now: Date,
  notAfter: Date,
): Promise<IssuedCertificate> {
  const keys = await generateKeys();
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${commonName}`,
    notBefore: new Date(now.getTime() - SKEW_MS),
    notAfter,
    signingAlgorithm: ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: joinPemBundle([ca.toString('pem')]), keyPem: await keyPem(keys.privateKey), notAfter };
}

/** A leaf certificate `ca` signed, for a server or a client, valid from `now` until `notAfter`. */
export async function issueLeafCertificate(
  ca: { certPem: string; keyPem: string },
  profile: LeafProfile,
  now: Date,
  notAfter: Date,
): Promise<IssuedCertificate> {
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await webcrypto.subtle.importKey(
    'pkcs8',
    x509.PemConverter.decode(ca.keyPem)[0] as ArrayBuffer,
    ALGORITHM,
    false,
    ['sign'],
  );
  const leafKeys = await generateKeys();
  const names = [
    ...profile.dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...profile.ipAddresses.map((value) => ({ type: 'ip' as const, value })),
  ];
  const commonName = profile.commonName ?? profile.dnsNames[0] ?? profile.ipAddresses[0] ?? 'vcuda';
  const usage =
    profile.usage === 'server'
      ? x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment
      : x509.KeyUsageFlags.digitalSignature;
  const leaf = await x509.X509CertificateGenerator.create({
    subject: `CN=${commonName}`,
    issuer: caCert.subject,
    notBefore: new Date(now.getTime() - SKEW_MS),
    notAfter,
    signingAlgorithm: ALGORITHM,
    publicKey: leafKeys.publicKey,
    signingKey: caKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(usage, true),
      new x509.ExtendedKeyUsageExtension([
        profile.usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth,
      ]),
      ...(names.length > 0 ? [new x509.SubjectAlternativeNameExtension(names)] : []),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return {
    certPem: joinPemBundle([leaf.toString('pem')]),
    keyPem: `${(await keyPem(leafKeys.privateKey)).trim()}\n`,
    notAfter,
  };
}

/** A fresh CA and a serving certificate it signed, both valid from `now` for `validityDays`. */
export async function issueServingCertificate(
  subject: CertificateSubject,
  validityDays: number,
  now: Date,
): Promise<{ caPem: string; certPem: string; keyPem: string; notAfter: Date }> {
  const notAfter = new Date(now.getTime() + validityDays * DAY_MS);
  // The CA outlives its serving certificate by a day, so a late rotation still chains.
  const ca = await issueCertificateAuthority(
    `vcuda webhook CA ${now.toISOString()}`,
    now,
    new Date(notAfter.getTime() + DAY_MS),
  );
  const leaf = await issueLeafCertificate(ca, { ...subject, usage: 'server' }, now, notAfter);
  return { caPem: ca.certPem, certPem: leaf.certPem, keyPem: leaf.keyPem, notAfter };
}

/**
 * Why a stored certificate cannot be kept, or undefined when it can: expiring within the
 * rotation window, not yet valid, not matching its key, or not covering the wanted names.
 */
export function findRenewalReason(
  stored: { certPem: string; keyPem: string },
  subject: CertificateSubject,
  rotateBeforeDays: number,
  now: Date,
): string | undefined {
  let cert: NodeX509;
  try {
    cert = new NodeX509(stored.certPem);
    if (!cert.checkPrivateKey(createPrivateKey(stored.keyPem))) return 'the key does not match the certificate';
  } catch (err) {
    return `unreadable: ${messageOf(err)}`;
  }
  const notAfter = new Date(cert.validTo).getTime();
  if (notAfter - now.getTime() < rotateBeforeDays * DAY_MS) return `expires ${new Date(notAfter).toISOString()}`;
  if (new Date(cert.validFrom).getTime() > now.getTime()) return 'not valid yet';
  const san = cert.subjectAltName ?? '';
  const missing = [
    ...subject.dnsNames.filter((d) => !san.split(', ').includes(`DNS:${d}`)),
    ...subject.ipAddresses.filter((ip) => !san.split(', ').includes(`IP Address:${ip}`)),
  ];
  return missing.length ? `does not cover ${missing.join(', ')}` : undefined;
}

/** Secret data keys (kubernetes.io/tls, plus the CA bundle). */
export type CertificateSecretData = { 'tls.crt': string; 'tls.key': string; 'ca.crt': string };

/** A Secret of PEM values under fixed keys (the adapter does base64), written with optimistic concurrency. */
export type PemSecretStore<K extends string> = {
  readonly description: string;
  read(): Promise<{ data: Partial<Record<K, string>>; resourceVersion: string } | undefined>;
  /** Throws SecretConflictError when it already exists. */
  create(data: Record<K, string>): Promise<void>;
  /** Throws SecretConflictError when resourceVersion is stale. */
  replace(data: Record<K, string>, resourceVersion: string): Promise<void>;
};

/** The webhook's certificate Secret, as certificates.ts needs it. */
export type CertificateSecretStore = PemSecretStore<keyof CertificateSecretData>;

export class SecretConflictError extends VcudaError {
  constructor(what: string) {
    super('conflict', `${what} was changed by another replica`);
  }
}

function notAfterOf(pem: string): Date {
  return new Date(new NodeX509(pem).validTo);
}

function servingFrom(data: CertificateSecretData): ServingCertificate {
  return {
    certPem: data['tls.crt'],
    keyPem: data['tls.key'],
    caBundlePem: joinPemBundle(splitPemBundle(data['ca.crt'])),
    notAfter: notAfterOf(data['tls.crt']),
  };
}

export type EnsureOutcome = ServingCertificate & { action: 'kept' | 'created' | 'rotated'; reason?: string };

/** What `ensureSecretData` did: kept the stored data, or wrote new data (and why). */
export type SecretOutcome<K extends string> = {
  data: Record<K, string>;
  action: 'kept' | 'created' | 'rotated';
  reason?: string;
};

/**
 * Makes `store` hold data that `renewalReason` accepts (returns undefined for), writing
 * `issue(current)` otherwise. Safe to run from every replica at once: a lost create/replace race
 * re-reads and judges the winner's data.
 */
export async function ensureSecretData<K extends string>(
  store: PemSecretStore<K>,
  keys: readonly K[],
  renewalReason: (data: Record<K, string>) => string | undefined,
  issue: (current: Partial<Record<K, string>> | undefined) => Promise<Record<K, string>>,
): Promise<SecretOutcome<K>> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const current = await store.read();
    const data = current?.data;
    const complete = data && keys.every((k) => data[k]) ? (data as Record<K, string>) : undefined;
    const reason = complete
      ? renewalReason(complete)
      : current
        ? `the Secret lacks ${keys.slice(0, -1).join(', ')} or ${keys.at(-1)}`
        : undefined;
    if (complete && !reason) return { data: complete, action: 'kept' };
    const next = await issue(data);
    try {
      if (current) await store.replace(next, current.resourceVersion);
      else await store.create(next);
      return { data: next, action: current ? 'rotated' : 'created', ...(reason ? { reason } : {}) };
    } catch (err) {
      if (!(err instanceof SecretConflictError)) throw err;
    }
  }
  throw new VcudaError(
    'unavailable',
    `${store.description} kept changing under concurrent writers; gave up after 3 attempts`,
  );
}

const CERTIFICATE_SECRET_KEYS = ['tls.crt', 'tls.key', 'ca.crt'] as const;

/**
 * Makes the shared Secret hold a usable certificate and returns it. Safe to run from every
 * replica at once: a lost create/replace race re-reads and adopts the winner's certificate.
 */
export async function ensureServingCertificate(
  store: CertificateSecretStore,
  subject: CertificateSubject,
  lifetime: CertificateLifetime,
  now: Date,
): Promise<EnsureOutcome> {
  const outcome = await ensureSecretData(
    store,
    CERTIFICATE_SECRET_KEYS,
    (data) =>
      findRenewalReason({ certPem: data['tls.crt'], keyPem: data['tls.key'] }, subject, lifetime.rotateBeforeDays, now),
    async (current) => {
      const issued = await issueServingCertificate(subject, lifetime.validityDays, now);
      // Keep the CAs still valid, so servers not yet reloaded stay trusted; drop expired ones.
      const previous = splitPemBundle(current?.['ca.crt'] ?? '').filter((pem) => {
        try {
          return notAfterOf(pem).getTime() > now.getTime();
        } catch {
          return false;
        }
      });
      return {
        'tls.crt': issued.certPem,
        'tls.key': issued.keyPem,
        'ca.crt': joinPemBundle([issued.caPem, ...previous.slice(0, 1)]),
      };
    },
  );
  return {
    ...servingFrom(outcome.data),
    action: outcome.action,
    ...(outcome.reason ? { reason: outcome.reason } : {}),
  };
}

/** Files mode: the supplied certificate, key and CA, checked to belong together. */
export function readCertificateFiles(
  files: { certFile: string; keyFile: string; caFile?: string | undefined },
  readFile: (path: string) => string,
): ServingCertificate {
  const certPem = readFile(files.certFile);
  const keyPem = readFile(files.keyFile);
  const caBundlePem = files.caFile ? readFile(files.caFile) : certPem;
  let cert: NodeX509;
  try {
    cert = new NodeX509(certPem);
  } catch (err) {
    throw new VcudaError('invalid', `certificates.certFile ${files.certFile}: not a PEM certificate (${String(err)})`);
  }
  let matches = false;
  try {
    matches = cert.checkPrivateKey(createPrivateKey(keyPem));
  } catch (err) {
    throw new VcudaError('invalid', `certificates.keyFile ${files.keyFile}: not a PEM private key (${String(err)})`);
  }
  if (!matches)
    throw new VcudaError('invalid', `certificates.keyFile ${files.keyFile} does not match ${files.certFile}`);
  if (splitPemBundle(caBundlePem).length === 0) {
    throw new VcudaError('invalid', `certificates.caFile ${files.caFile}: no PEM certificate in it`);
  }
  // Normalized: a supplied bundle may lack newlines between certificates (see joinPemBundle).
  return { certPem, keyPem, caBundlePem: joinPemBundle(splitPemBundle(caBundlePem)), notAfter: new Date(cert.validTo) };
}
