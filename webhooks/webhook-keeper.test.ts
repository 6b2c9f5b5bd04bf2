import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import {
  type CertificateSecretData,
  type CertificateSecretStore,
  issueServingCertificate,
  SecretConflictError,
  type ServingCertificate,
  splitPemBundle,
} from './certificates.js';
import { webhookConfigSchema } from './config.js';
import type { StoredConfiguration, WebhookConfiguration, WebhookConfigurationClient } from './registration.js';
import { certificateSubjectFor, createWebhookKeeper } from './webhook-keeper.js';

const DAY = 24 * 3600 * 1000;
const names = resourceNames();

function memorySecret(): CertificateSecretStore {
  let stored: { data: CertificateSecretData; resourceVersion: string } | undefined;
  let v = 0;
  return {
    description: 'Secret s',
    read: async () => stored && structuredClone(stored),
    create: async (data) => {
      if (stored) throw new SecretConflictError('Secret s');
      stored = { data, resourceVersion: String(++v) };
    },
    replace: async (data, rv) => {
      if (stored?.resourceVersion !== rv) throw new SecretConflictError('Secret s');
      stored = { data, resourceVersion: String(++v) };
    },
  };
}

function memoryConfigurations() {
  const objects = new Map<string, WebhookConfiguration & StoredConfiguration>();
  let v = 0;
  const put = async (obj: WebhookConfiguration) => {
    const copy = structuredClone({ ...obj, metadata: { ...obj.metadata, resourceVersion: String(++v) } });
    objects.set(`${obj.kind}/${obj.metadata.name}`, copy);
    return copy;
  };
  const client: WebhookConfigurationClient = {
    serverVersion: async () => ({ major: '1', minor: '26', gitVersion: 'v1.26.5' }),
    read: async (kind, name) => structuredClone(objects.get(`${kind}/${name}`)),
    create: put,
    replace: put,
  };
  const caBundleOf = (kind: WebhookConfiguration['kind'], name: string) =>
    Buffer.from(objects.get(`${kind}/${name}`)?.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString();
  return { client, caBundleOf };
}

const quiet = { info: () => {}, warn: () => {} };

describe('createWebhookKeeper', () => {
  it('issues, registers, keeps, then rotates and re-registers with both CAs', async () => {
    let now = new Date('2026-11-22T00:00:00Z');
    const seen: ServingCertificate[] = [];
    const api = memoryConfigurations();
    const keeper = createWebhookKeeper({
      config: webhookConfigSchema.parse({}),
      names,
      secretStore: memorySecret(),
      registrationClient: api.client,
      clock: () => now,
      logger: quiet,
      onCertificate: (cert) => seen.push(cert),
    });
    const first = await keeper.refresh();
    expect(seen).toHaveLength(1);
    expect(first.registration).toMatchObject({ scoping: 'selectors', mutating: 'created', validating: 'created' });
    expect(api.caBundleOf('MutatingWebhookConfiguration', 'vcuda-mutate-pods')).toBe(first.certificate.caBundlePem);

    now = new Date(now.getTime() + 100 * DAY);
    const second = await keeper.refresh();
    expect(seen).toHaveLength(1);
    expect(second.registration).toMatchObject({ mutating: 'unchanged', validating: 'unchanged' });

    now = new Date(now.getTime() + 250 * DAY);
    const third = await keeper.refresh();
    expect(seen).toHaveLength(2);
    expect(seen[1]?.certPem).not.toBe(seen[0]?.certPem);
    expect(third.registration).toMatchObject({ mutating: 'updated', validating: 'updated' });
    const bundle = splitPemBundle(api.caBundleOf('ValidatingWebhookConfiguration', 'vcuda-validate-pods'));
    expect(bundle).toHaveLength(2);
    // The previous serving certificate is still trusted by the new bundle.
    const oldLeaf = new X509Certificate(seen[0]?.certPem ?? '');
    expect(bundle.some((pem) => oldLeaf.checkIssued(new X509Certificate(pem)))).toBe(true);
  });

  it('files mode re-reads supplied files and reports a renewed certificate', async () => {
    const a = await issueServingCertificate({ dnsNames: ['localhost'], ipAddresses: [] }, 30, new Date());
    const b = await issueServingCertificate({ dnsNames: ['localhost'], ipAddresses: [] }, 30, new Date());
    const files: Record<string, string> = { '/tls.crt': a.certPem, '/tls.key': a.keyPem, '/ca.crt': a.caPem };
    const seen: string[] = [];
    const keeper = createWebhookKeeper({
      config: webhookConfigSchema.parse({
        certificates: { mode: 'files', certFile: '/tls.crt', keyFile: '/tls.key', caFile: '/ca.crt' },
      }),
      names,
      readFile: (p) => files[p] ?? '',
      clock: () => new Date(),
      logger: quiet,
      onCertificate: (cert) => seen.push(cert.certPem),
    });
    await keeper.refresh();
    await keeper.refresh();
    Object.assign(files, { '/tls.crt': b.certPem, '/tls.key': b.keyPem, '/ca.crt': b.caPem });
    const out = await keeper.refresh();
    expect(seen).toEqual([a.certPem, b.certPem]);
    expect(out.registration).toBeUndefined();
  });

  it('a failing refresh in the background is logged, not thrown', async () => {
    const warnings: string[] = [];
    const keeper = createWebhookKeeper({
      config: webhookConfigSchema.parse({}),
      names,
      clock: () => new Date(),
      logger: { info: () => {}, warn: (_o, m) => warnings.push(m) },
      onCertificate: () => {},
    });
    await expect(keeper.refresh()).rejects.toThrow('needs the certificate Secret');
    const stop = keeper.start(5);
    await new Promise((r) => setTimeout(r, 30));
    stop();
    expect(warnings[0]).toBe('webhook refresh failed; retrying later');
  });
});

describe('certificateSubjectFor', () => {
  it.each([
    [{}, ['vcuda-control-plane', 'vcuda-control-plane.vcuda-system'], []],
    [{ url: 'https://127.0.0.1:8443' }, [], ['127.0.0.1']],
    [{ url: 'https://[::1]:8443' }, [], ['::1']],
    [{ url: 'https://dev.example.com:8443' }, ['dev.example.com'], []],
  ])('%o', (registration, dnsStart, ips) => {
    const subject = certificateSubjectFor(webhookConfigSchema.parse({ registration }).registration);
    expect(subject.dnsNames.slice(0, dnsStart.length)).toEqual(dnsStart);
    expect(subject.ipAddresses).toEqual(ips);
  });
});
