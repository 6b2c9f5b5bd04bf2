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
import { VcudaError } from '../contract/index.js';

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

/** A fresh CA and a serving certificate it signed, both valid from `now` for `validityDays`. */
export async function issueServingCertificate(
  subject: CertificateSubject,
  validityDays: number,
  now: Date,
): Promise<{ caPem: string; certPem: string; keyPem: string; notAfter: Date }> {
  const notBefore = new Date(now.getTime() - SKEW_MS);
  const notAfter = new Date(now.getTime() + validityDays * DAY_MS);
  const caKeys = await generateKeys();
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=vcuda webhook CA ${now.toISOString()}`,
    notBefore,
    // The CA outlives its serving certificate by a day, so a late rotation still chains.
    notAfter: new Date(notAfter.getTime() + DAY_MS),
    signingAlgorithm: ALGORITHM,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const leafKeys = await generateKeys();
  const names = [
    ...subject.dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...subject.ipAddresses.map((value) => ({ type: 'ip' as const, value })),
  ];
  const leaf = await x509.X509CertificateGenerator.create({
    subject: `CN=${subject.dnsNames[0] ?? subject.ipAddresses[0] ?? 'vcuda-webhook'}`,
    issuer: ca.subject,
    notBefore,
    notAfter,
    signingAlgorithm: ALGORITHM,
    publicKey: leafKeys.publicKey,
    signingKey: caKeys.privateKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
      await x509.AuthorityKeyIdentifierExtension.create(ca),
    ],
  });
  return {
    caPem: joinPemBundle([ca.toString('pem')]),
    certPem: joinPemBundle([leaf.toString('pem')]),
    keyPem: `${(await keyPem(leafKeys.privateKey)).trim()}\n`,
    notAfter,
  };
}

/**
 * Joins certificates into one bundle, each on its own lines: OpenSSL stops reading a bundle
 * where an END line runs into the next BEGIN, so the CAs after it would be silently ignored.
 */
export function joinPemBundle(pems: readonly string[]): string {
  return pems.map((p) => `${p.trim()}\n`).join('');
}

/** Splits a PEM bundle into its certificates. */
export function splitPemBundle(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((c) => `${c}\n`) ?? [];
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
    return `unreadable: ${err instanceof Error ? err.message : String(err)}`;
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

/** The Secret, as certificates.ts needs it; values are plain PEM (the adapter does base64). */
export type CertificateSecretStore = {
  readonly description: string;
  read(): Promise<{ data: Partial<CertificateSecretData>; resourceVersion: string } | undefined>;
  /** Throws SecretConflictError when it already exists. */
  create(data: CertificateSecretData): Promise<void>;
  /** Throws SecretConflictError when resourceVersion is stale. */
  replace(data: CertificateSecretData, resourceVersion: string): Promise<void>;
};

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
  for (let attempt = 0; attempt < 3; attempt++) {
    const current = await store.read();
    const data = current?.data;
    const complete =
      data?.['tls.crt'] && data['tls.key'] && data['ca.crt'] ? (data as CertificateSecretData) : undefined;
    const reason = complete
      ? findRenewalReason(
          { certPem: complete['tls.crt'], keyPem: complete['tls.key'] },
          subject,
          lifetime.rotateBeforeDays,
          now,
        )
      : current
        ? 'the Secret lacks tls.crt, tls.key or ca.crt'
        : undefined;
    if (complete && !reason) return { ...servingFrom(complete), action: 'kept' };
    const issued = await issueServingCertificate(subject, lifetime.validityDays, now);
    // Keep the CAs still valid, so servers not yet reloaded stay trusted; drop expired ones.
    const previous = splitPemBundle(complete?.['ca.crt'] ?? '').filter((pem) => {
      try {
        return notAfterOf(pem).getTime() > now.getTime();
      } catch {
        return false;
      }
    });
    const next: CertificateSecretData = {
      'tls.crt': issued.certPem,
      'tls.key': issued.keyPem,
      'ca.crt': joinPemBundle([issued.caPem, ...previous.slice(0, 1)]),
    };
    try {
      if (current) await store.replace(next, current.resourceVersion);
      else await store.create(next);
      return { ...servingFrom(next), action: current ? 'rotated' : 'created', ...(reason ? { reason } : {}) };
    } catch (err) {
      if (!(err instanceof SecretConflictError)) throw err;
    }
  }
  throw new VcudaError(
    'unavailable',
    `${store.description} kept changing under concurrent writers; gave up after 3 attempts`,
  );
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
