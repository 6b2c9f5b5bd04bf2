/**
 * A secure simulated API server (HTTPS, credentials required) refuses every caller it cannot
 * name, as a real one does: no token, a wrong token, the right token over plain HTTP. Only the
 * health and version paths stay open to anonymous callers (system:public-info-viewer).
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../kube-client.js';
import { writeKubeconfig } from '../kubeconfig.js';
import { createServingCert, type ServingCert } from '../tls/self-signed-cert.js';
import { type SimApiServer, startApiServer } from './api-server.js';
import { ADMIN } from './request-handler.js';

const TOKEN = 'a-long-random-admin-token';
const SECRET = '/api/v1/namespaces/default/secrets/signing-key';
const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

describe('secure simulated API server', () => {
  let api: SimApiServer;
  let cert: ServingCert;
  let dir: string;

  beforeAll(async () => {
    cert = await createServingCert();
    api = await startApiServer({ tokens: { [TOKEN]: ADMIN }, secure: { certPem: cert.certPem, keyPem: cert.keyPem } });
    dir = mkdtempSync(join(tmpdir(), 'vcuda-auth-'));
    const admin = new KubeClient(api.url, { token: TOKEN, caPem: cert.caPem });
    await admin.create('/api/v1/namespaces/default/secrets', {
      metadata: { name: 'signing-key' },
      stringData: { key: 'private' },
    });
  });
  afterAll(async () => {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const as = (token?: string) => new KubeClient(api.url, { caPem: cert.caPem, ...(token ? { token } : {}) });

  it('serves HTTPS and reads a Secret for the known token', async () => {
    expect(api.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const secret = await as(TOKEN).get(SECRET);
    expect(Buffer.from((secret['data'] as { key: string }).key, 'base64').toString()).toBe('private');
  });

  it('refuses an anonymous read of a Secret, and any other anonymous request, with 401', async () => {
    for (const path of [SECRET, '/api/v1/namespaces/default/secrets', '/api/v1/namespaces', '/api', '/apis']) {
      const res = await as().getText(path);
      expect(res.status, path).toBe(401);
      expect(JSON.parse(res.text)).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Unauthorized',
        reason: 'Unauthorized',
        code: 401,
      });
    }
    await expect(as().list('/api/v1/secrets?watch=1')).rejects.toMatchObject({ code: 401 });
    await expect(
      as().create('/apis/authentication.k8s.io/v1/tokenreviews', { spec: { token: TOKEN } }),
    ).rejects.toMatchObject({ code: 401 });
    await expect(as().create('/api/v1/namespaces', { metadata: { name: 'x' } })).rejects.toMatchObject({ code: 401 });
  });

  it('refuses a wrong token everywhere, the public paths included', async () => {
    for (const token of ['wrong', `${TOKEN}x`, TOKEN.slice(0, -1), 'constructor', '__proto__']) {
      expect((await as(token).getText(SECRET)).status, token).toBe(401);
      expect((await as(token).getText('/version')).status, token).toBe(401);
    }
  });

  it('reviews only the tokens it issued: inherited property names are no one', async () => {
    for (const token of ['constructor', '__proto__', 'toString', 'wrong']) {
      const review = await as(TOKEN).create('/apis/authentication.k8s.io/v1/tokenreviews', { spec: { token } });
      expect(review['status'], token).toEqual({ authenticated: false, error: 'invalid bearer token' });
    }
    const review = await as(TOKEN).create('/apis/authentication.k8s.io/v1/tokenreviews', { spec: { token: TOKEN } });
    expect(review['status']).toMatchObject({ authenticated: true, user: { username: ADMIN.username } });
  });

  it('answers health and version to anonymous callers, as system:public-info-viewer allows', async () => {
    for (const path of ['/healthz', '/livez', '/readyz', '/version']) {
      expect((await as().getText(path)).status, path).toBe(200);
    }
  });

  it('offers no plain-HTTP way in', async () => {
    const plain = new KubeClient(api.url.replace('https:', 'http:'), { token: TOKEN });
    await expect(plain.get(SECRET)).rejects.toThrow();
  });

  describe.skipIf(!hasKubectl)('kubectl (skipped: no kubectl on PATH)', () => {
    // Asynchronous: the API server answers from this very process. Stdin closed: refused without
    // credentials, kubectl would otherwise wait for a user name to be typed.
    const kubectl = (kubeconfig: string, ...args: string[]) =>
      new Promise<string>((resolve, reject) => {
        const child = execFile('kubectl', ['--kubeconfig', kubeconfig, ...args], (err, stdout, stderr) =>
          err ? reject(new Error(`${stderr}${err.message}`)) : resolve(stdout),
        );
        child.stdin?.end();
      });

    it('works with the written kubeconfig (CA and token) and is refused without the token', async () => {
      const good = join(dir, 'kubeconfig');
      writeKubeconfig(good, api.url, { token: TOKEN, caPem: cert.caPem });
      expect(await kubectl(good, 'get', 'secret', 'signing-key', '-o', 'jsonpath={.data.key}')).toBe(
        Buffer.from('private').toString('base64'),
      );
      const wrong = join(dir, 'wrong');
      writeKubeconfig(wrong, api.url, { token: 'wrong', caPem: cert.caPem });
      await expect(kubectl(wrong, 'get', 'secret', 'signing-key')).rejects.toThrow(/\(Unauthorized\)/);
      const anonymous = join(dir, 'anonymous');
      writeKubeconfig(anonymous, api.url, { caPem: cert.caPem });
      await expect(kubectl(anonymous, 'get', 'secret', 'signing-key')).rejects.toThrow();
    });
  });
});
