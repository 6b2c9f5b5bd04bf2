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
import { certificateSubjectFor, createWebhookKeeper, registrationOnPort } from './webhook-keeper.js';

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

  it('keeps the claim hooks with the same bundle when claims.register is on, and only then', async () => {
    let now = new Date('2026-11-22T00:00:00Z');
    const api = memoryConfigurations();
    const keeperWith = (register: boolean) =>
      createWebhookKeeper({
        config: webhookConfigSchema.parse({ claims: { register } }),
        names,
        secretStore: memorySecret(),
        registrationClient: api.client,
        clock: () => now,
        logger: quiet,
        onCertificate: () => {},
      });
    expect((await keeperWith(false).refresh()).registration?.claims).toBeUndefined();
    expect(api.caBundleOf('ValidatingWebhookConfiguration', 'vcuda-validate-claims')).toBe('');
    const keeper = keeperWith(true);
    const first = await keeper.refresh();
    expect(first.registration?.claims).toEqual({ mutating: 'created', validating: 'created' });
    expect(api.caBundleOf('MutatingWebhookConfiguration', 'vcuda-mutate-claims')).toBe(first.certificate.caBundlePem);
    now = new Date(now.getTime() + 350 * DAY);
    const rotated = await keeper.refresh();
    expect(rotated.registration?.claims).toEqual({ mutating: 'updated', validating: 'updated' });
    expect(api.caBundleOf('ValidatingWebhookConfiguration', 'vcuda-validate-claims')).toBe(
      rotated.certificate.caBundlePem,
    );
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

describe('registrationOnPort', () => {
  const onPort0 = webhookConfigSchema.parse({ registration: { url: 'https://127.0.0.1:0' } }).registration;

  it('registers a URL on port 0 with the port the listener bound', async () => {
    const objects = new Map<string, WebhookConfiguration>();
    const client: WebhookConfigurationClient = {
      serverVersion: async () => ({ major: '1', minor: '26', gitVersion: 'v1.26.5' }),
      read: async (kind, name) =>
        objects.get(`${kind}/${name}`) as (WebhookConfiguration & StoredConfiguration) | undefined,
      create: async (obj) => {
        objects.set(`${obj.kind}/${obj.metadata.name}`, obj);
        return { ...obj, metadata: { ...obj.metadata, resourceVersion: '1' } };
      },
      replace: async (obj) => ({ ...obj, metadata: { ...obj.metadata, resourceVersion: '2' } }),
    };
    let bound: number | undefined;
    const keeper = createWebhookKeeper({
      config: webhookConfigSchema.parse({ registration: { url: 'https://127.0.0.1:0' } }),
      names,
      secretStore: memorySecret(),
      registrationClient: client,
      clock: () => new Date('2026-11-22T00:00:00Z'),
      logger: quiet,
      onCertificate: () => {},
      boundPort: () => bound,
    });
    await keeper.certificate();
    expect(objects.size).toBe(0);
    await expect(keeper.refresh()).rejects.toThrow("port 0 needs the bound listener's port");
    bound = 40123;
    await keeper.refresh();
    const urls = [...objects.values()].flatMap((o) => o.webhooks.map((w) => w.clientConfig.url));
    expect(urls.length).toBeGreaterThan(0);
    for (const url of urls) expect(url).toMatch(/^https:\/\/127\.0\.0\.1:40123\//);
  });

  it('leaves a URL with its own port, and a Service registration, as they are', () => {
    const fixed = webhookConfigSchema.parse({ registration: { url: 'https://cp.example:8443' } }).registration;
    expect(registrationOnPort(fixed, 40123)).toBe(fixed);
    const service = webhookConfigSchema.parse({}).registration;
    expect(registrationOnPort(service, 40123)).toBe(service);
    expect(registrationOnPort(onPort0, 1).url).toBe('https://127.0.0.1:1/');
  });
});
