import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { KubeConfig } from '@kubernetes/client-node';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { ensureServingCertificate, serviceDnsNames } from './certificates.js';
import { registrationConfigSchema } from './config.js';
import { kubeCertificateSecretStore, kubeWebhookConfigurationClient } from './kube-adapters.js';
import { ensureWebhookRegistration } from './registration.js';

type Obj = { metadata: { name: string; namespace?: string; resourceVersion?: string }; [k: string]: unknown };

/** A minimal API server on loopback: the few endpoints the adapters call, with 404/409 semantics. */
function fakeApiServer() {
  const objects = new Map<string, Obj>();
  const requests: string[] = [];
  let rv = 100;
  const status = (code: number, reason: string) => ({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    reason,
    code,
  });
  const app = new Hono();
  app.use(async (c, next) => {
    requests.push(`${c.req.method} ${new URL(c.req.url).pathname}`);
    await next();
  });
  app.get('/version', (c) => c.json({ major: '1', minor: '26', gitVersion: 'v1.26.5' }));
  const collection = (base: string) => {
    app.get(`${base}/:name`, (c) => {
      const obj = objects.get(`${c.req.path}`);
      return obj ? c.json(obj) : c.json(status(404, 'NotFound'), 404);
    });
    app.post(base, async (c) => {
      const body = (await c.req.json()) as Obj;
      const key = `${c.req.path}/${body.metadata.name}`;
      if (objects.has(key)) return c.json(status(409, 'AlreadyExists'), 409);
      const stored = { ...body, metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      objects.set(key, stored);
      return c.json(stored, 201);
    });
    app.put(`${base}/:name`, async (c) => {
      const body = (await c.req.json()) as Obj;
      const current = objects.get(c.req.path);
      if (!current) return c.json(status(404, 'NotFound'), 404);
      if (body.metadata.resourceVersion !== current.metadata.resourceVersion)
        return c.json(status(409, 'Conflict'), 409);
      const stored = { ...body, metadata: { ...body.metadata, resourceVersion: String(++rv) } };
      objects.set(c.req.path, stored);
      return c.json(stored);
    });
  };
  collection('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations');
  collection('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations');
  collection('/api/v1/namespaces/:ns/secrets');
  collection('/api/v1/namespaces/:ns/events');
  return { app, objects, requests };
}

let server: ReturnType<typeof serve>;
let kc: KubeConfig;
const api = fakeApiServer();

beforeAll(async () => {
  await new Promise<void>((resolve) => {
    server = serve({ fetch: api.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'vcuda', token: 'test' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'vcuda' }],
    currentContext: 'fake',
  });
});

afterAll(() => {
  server?.close();
});

describe('client-node adapters against an API server on loopback', () => {
  it('creates the certificate Secret base64-encoded, then reads it back and keeps it', async () => {
    const store = kubeCertificateSecretStore(kc, 'vcuda-system', 'vcuda-webhook-tls');
    expect(await store.read()).toBeUndefined();
    const subject = {
      dnsNames: serviceDnsNames({ name: 'vcuda-control-plane', namespace: 'vcuda-system' }),
      ipAddresses: [],
    };
    const lifetime = { validityDays: 365, rotateBeforeDays: 30 };
    const created = await ensureServingCertificate(store, subject, lifetime, new Date());
    expect(created.action).toBe('created');
    const raw = api.objects.get('/api/v1/namespaces/vcuda-system/secrets/vcuda-webhook-tls') as Obj & {
      type: string;
      data: Record<string, string>;
    };
    expect(raw.type).toBe('kubernetes.io/tls');
    expect(Buffer.from(raw.data['tls.crt'] ?? '', 'base64').toString()).toBe(created.certPem);
    const again = await ensureServingCertificate(store, subject, lifetime, new Date());
    expect(again).toMatchObject({ action: 'kept', certPem: created.certPem, caBundlePem: created.caBundlePem });
  });

  it('a stale resourceVersion is a conflict, not a failure', async () => {
    const store = kubeCertificateSecretStore(kc, 'vcuda-system', 'vcuda-webhook-tls');
    await expect(store.replace({ 'tls.crt': 'a', 'tls.key': 'b', 'ca.crt': 'c' }, '1')).rejects.toMatchObject({
      code: 'conflict',
    });
    await expect(store.create({ 'tls.crt': 'a', 'tls.key': 'b', 'ca.crt': 'c' })).rejects.toMatchObject({
      code: 'conflict',
    });
  });

  it('registers both webhook configurations for the 1.26 server, idempotently', async () => {
    const client = kubeWebhookConfigurationClient(kc);
    const input = { config: registrationConfigSchema.parse({}), names: resourceNames(), caBundlePem: 'PEM' };
    expect(await ensureWebhookRegistration(client, input)).toEqual({
      serverVersion: 'v1.26.5',
      scoping: 'selectors',
      mutating: 'created',
      validating: 'created',
    });
    expect(await ensureWebhookRegistration(client, input)).toMatchObject({
      mutating: 'unchanged',
      validating: 'unchanged',
    });
    const stored = api.objects.get(
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/vcuda-mutate-pods',
    ) as Obj & {
      webhooks: { name: string; failurePolicy: string }[];
    };
    expect(stored.webhooks.map((w) => [w.name, w.failurePolicy])).toEqual([
      ['mutate.pods.vcuda.io', 'Fail'],
      ['mutate-unlabelled-namespaces.pods.vcuda.io', 'Ignore'],
    ]);
    const updated = await ensureWebhookRegistration(client, { ...input, caBundlePem: 'NEW' });
    expect(updated).toMatchObject({ mutating: 'updated', validating: 'updated' });
  });

  it('reports an unreachable API server with what it was doing', async () => {
    const dead = new KubeConfig();
    dead.loadFromOptions({
      clusters: [{ name: 'd', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'd', cluster: 'd', user: 'u' }],
      currentContext: 'd',
    });
    await expect(kubeWebhookConfigurationClient(dead).serverVersion()).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining('reading the API server version'),
    });
  });
});
