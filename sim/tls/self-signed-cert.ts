/**
 * A throwaway CA and a serving certificate for 127.0.0.1/localhost, so the simulated API server
 * can call a webhook over HTTPS and trust it through `caBundle`, as a real cluster does.
 */
import { webcrypto } from 'node:crypto';

type X509 = typeof import('@peculiar/x509');
let loaded: Promise<X509> | undefined;

/**
 * @peculiar/x509's dependency injector insists on a Reflect metadata API at load time although it
 * reads no metadata here; a minimal one is installed before the library is imported.
 */
function loadX509(): Promise<X509> {
  const r = Reflect as unknown as Record<string, unknown>;
  if (typeof r['getMetadata'] !== 'function') {
    const store = new WeakMap<object, Map<unknown, unknown>>();
    r['defineMetadata'] = (k: unknown, v: unknown, target: object) => {
      const m = store.get(target) ?? new Map();
      m.set(k, v);
      store.set(target, m);
    };
    r['getMetadata'] = (k: unknown, target: object) => store.get(target)?.get(k);
    r['getOwnMetadata'] = r['getMetadata'];
    r['hasMetadata'] = (k: unknown, target: object) => store.get(target)?.has(k) ?? false;
    r['metadata'] = (k: unknown, v: unknown) => (target: object) =>
      (r['defineMetadata'] as (...a: unknown[]) => void)(k, v, target);
  }
  loaded ??= import('@peculiar/x509').then((x509) => {
    x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
    return x509;
  });
  return loaded;
}

export type ServingCert = {
  /** PEM of the CA: what goes, base64-encoded, into a webhook's `caBundle`. */
  caPem: string;
  certPem: string;
  keyPem: string;
};

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n');
  return `-----BEGIN ${label}-----\n${b64.trimEnd()}\n-----END ${label}-----\n`;
}

export async function createServingCert(
  opts: { hosts?: string[]; now?: Date; validDays?: number } = {},
): Promise<ServingCert> {
  const x509 = await loadX509();
  const now = opts.now ?? new Date();
  const notAfter = new Date(now.getTime() + (opts.validDays ?? 30) * 86_400_000);
  const notBefore = new Date(now.getTime() - 60_000);
  const caKeys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=vcuda-sim-ca',
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const hosts = opts.hosts ?? ['127.0.0.1', 'localhost'];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: '02',
    subject: 'CN=vcuda-webhook',
    issuer: ca.subject,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(
        hosts.map((h) => (/^[\d.]+$/.test(h) ? { type: 'ip' as const, value: h } : { type: 'dns' as const, value: h })),
      ),
    ],
  });
  const keyDer = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { caPem: ca.toString('pem'), certPem: cert.toString('pem'), keyPem: pem('PRIVATE KEY', keyDer) };
}
