/**
 * The whole path an API server takes outside the cluster: read the registered configuration,
 * trust only its caBundle, call its URL over HTTPS (with the `timeout` query it appends), and get
 * an answer from the certificate the keeper issued — before and after a rotation.
 */
import { readFileSync } from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { createApp } from '../control-plane/app.js';
import { admissionRoutes } from './admission-routes.js';
import { type CertificateSecretData, type CertificateSecretStore, SecretConflictError } from './certificates.js';
import { webhookConfigSchema } from './config.js';
import type { StoredConfiguration, WebhookConfiguration, WebhookConfigurationClient } from './registration.js';
import { createWebhookKeeper } from './webhook-keeper.js';

const DAY = 24 * 3600 * 1000;
const review = readFileSync(new URL('./testdata/kubernetes-1.26/admission-mutate-create-share.json', import.meta.url));

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
  const put = async (obj: WebhookConfiguration) => {
    objects.set(`${obj.kind}/${obj.metadata.name}`, structuredClone(obj));
    return obj;
  };
  const client: WebhookConfigurationClient = {
    serverVersion: async () => ({ major: '1', minor: '26' }),
    read: async (kind, name) => structuredClone(objects.get(`${kind}/${name}`)),
    create: put,
    replace: put,
  };
  return { client, mutating: () => objects.get('MutatingWebhookConfiguration/vcuda-mutate-pods') };
}

/** Calls the webhook as the API server would: URL and trust from the stored configuration only. */
function callAsApiServer(config: WebhookConfiguration | undefined): Promise<{ status: number; body: string }> {
  const hook = config?.webhooks[0];
  const url = new URL(`${hook?.clientConfig.url}?timeout=5s`);
  const ca = Buffer.from(hook?.clientConfig.caBundle ?? '', 'base64').toString();
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: 'POST',
        ca,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': review.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(review);
  });
}

describe('served over HTTPS with the keeper certificate', () => {
  it('an API-server-like client trusting only caBundle gets answers before and after rotation', async () => {
    const app = createApp({
      admission: admissionRoutes({
        names: resourceNames(),
        memoryUnitMiB: 1,
        clusterName: 'lab',
        privilegedUsernames: [],
        maxBodyBytes: 3 << 20,
        logger: { info: () => {}, warn: () => {} },
      }),
    });
    // Port first (the URL goes into the certificate's subject and the registration).
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1', createServer: https.createServer });
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as AddressInfo;
    // Issued 340 days ago (so still valid for a real TLS client today), rotated today.
    let now = new Date(Date.now() - 340 * DAY);
    const api = memoryConfigurations();
    const keeper = createWebhookKeeper({
      config: webhookConfigSchema.parse({ registration: { url: `https://127.0.0.1:${port}` } }),
      names: resourceNames(),
      secretStore: memorySecret(),
      registrationClient: api.client,
      clock: () => now,
      logger: { info: () => {}, warn: () => {} },
      onCertificate: (cert) => (server as https.Server).setSecureContext({ cert: cert.certPem, key: cert.keyPem }),
    });
    try {
      await keeper.refresh();
      const first = await callAsApiServer(api.mutating());
      expect(first.status).toBe(200);
      expect(JSON.parse(first.body).response).toMatchObject({
        uid: '438597a4-63b4-4da0-9522-ce423b151589',
        allowed: true,
      });

      // The keeper swaps the certificate and writes the new bundle (new and old CA) in one pass.
      const before = api.mutating();
      now = new Date();
      await keeper.refresh();
      const after = api.mutating();
      expect(after?.webhooks[0]?.clientConfig.caBundle).not.toBe(before?.webhooks[0]?.clientConfig.caBundle);
      expect((await callAsApiServer(after)).status).toBe(200);
      // The stale configuration (only the old CA) no longer trusts the rotated server.
      await expect(callAsApiServer(before)).rejects.toThrow();
    } finally {
      server.close();
    }
  });
});
