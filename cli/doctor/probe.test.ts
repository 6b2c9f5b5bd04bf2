/**
 * `vcuda doctor`'s network probes against real servers: an extender open to anyone, one that
 * refuses callers without a client certificate (in the handshake, or with 401 after it), one
 * that never answers; and the ledger's migration bookkeeping on PostgreSQL.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import * as x509 from '@peculiar/x509';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, isPostgresReachable } from '../../test/support/db/test-databases.js';
import { judgeExtender, judgeMigrations } from './judge.js';
import { attempt, probeExtender, probeMigrations, type Tls } from './probe.js';

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const pem = async (key: webcrypto.CryptoKey) =>
  x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');

/** A CA, a serving certificate for 127.0.0.1, and a client certificate for `clientName`, as the extender's design has them. */
async function extenderPki(clientName: string) {
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 30 * 86_400_000);
  const caKeys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    name: 'CN=test extender CA',
    notBefore,
    notAfter,
    signingAlgorithm: ALG,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
    ],
  });
  const leaf = async (cn: string, usage: string, names: x509.JsonGeneralName[]) => {
    const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
    const cert = await x509.X509CertificateGenerator.create({
      subject: `CN=${cn}`,
      issuer: ca.subject,
      notBefore,
      notAfter,
      signingAlgorithm: ALG,
      publicKey: keys.publicKey,
      signingKey: caKeys.privateKey,
      extensions: [
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([usage]),
        new x509.SubjectAlternativeNameExtension(names),
      ],
    });
    return { cert: cert.toString('pem'), key: await pem(keys.privateKey) };
  };
  return {
    ca: ca.toString('pem'),
    server: await leaf('extender', x509.ExtendedKeyUsage.serverAuth, [{ type: 'ip', value: '127.0.0.1' }]),
    client: await leaf(clientName, x509.ExtendedKeyUsage.clientAuth, [{ type: 'dns', value: clientName }]),
  };
}

const servers: net.Server[] = [];
const sockets = new Set<net.Socket>();

async function listen(server: net.Server): Promise<number> {
  servers.push(server);
  server.on('connection', (s: net.Socket) => sockets.add(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as net.AddressInfo).port;
}

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

describe('extender probe', () => {
  let pki: Awaited<ReturnType<typeof extenderPki>>;
  let creds: Tls;
  beforeAll(async () => {
    pki = await extenderPki('vcuda-scheduler');
    creds = { ...pki.client, ca: pki.ca };
  });

  const facts = (extender: Awaited<ReturnType<typeof probeExtender>>) =>
    judgeExtender({ namespace: 'vcuda-system', now: new Date(), extender } as never);

  it('an extender on plain HTTP that answers anyone fails', async () => {
    const server = http.createServer((_req, res) => res.end('{"NodeNames":[]}'));
    const url = `http://127.0.0.1:${await listen(server)}`;
    const found = facts(await probeExtender({ url }, undefined, 2000));
    expect(found).toEqual([
      expect.objectContaining({
        verdict: 'fail',
        summary: `${url} answered HTTP 200 to a caller without a client certificate: anyone who reaches it can bind pods`,
      }),
    ]);
  });

  it('refusal in the handshake passes; the client certificate is accepted', async () => {
    const server = https.createServer(
      { ...pki.server, ca: pki.ca, requestCert: true, rejectUnauthorized: true },
      (_req, res) => res.end('{}'),
    );
    const url = `https://127.0.0.1:${await listen(server)}`;
    const e = await probeExtender({ url }, creds, 2000);
    expect(e.anonymous).toHaveProperty('handshakeRefused');
    expect(e.withClientCert).toMatchObject({ status: 200 });
    expect(facts(e)).toEqual([
      expect.objectContaining({ verdict: 'ok', summary: expect.stringContaining('in the TLS handshake') }),
    ]);
  });

  it('401 after the handshake passes; a certificate of another CA is refused and named', async () => {
    // As the extender's gate does: ask for a certificate, finish the handshake, answer 401 without one.
    const server = https.createServer(
      { ...pki.server, ca: pki.ca, requestCert: true, rejectUnauthorized: false },
      (req, res) => {
        const socket = req.socket as TLSSocket;
        res.statusCode = socket.authorized ? 200 : 401;
        res.end(socket.authorized ? '{}' : `{"Error":"${String(socket.authorizationError)}"}`);
      },
    );
    const url = `https://127.0.0.1:${await listen(server)}`;
    const ok = await probeExtender({ url }, creds, 2000);
    expect(ok.anonymous).toEqual({ status: 401 });
    expect(facts(ok)[0]).toMatchObject({ verdict: 'ok', summary: expect.stringContaining('HTTP 401') });

    const stranger = await extenderPki('vcuda-scheduler');
    const refused = await probeExtender({ url }, { ...stranger.client, ca: pki.ca }, 2000);
    expect(facts(refused)).toEqual([
      expect.objectContaining({
        verdict: 'fail',
        summary: expect.stringContaining("the scheduler's client certificate was refused: HTTP 401"),
        fix: expect.stringContaining('vcuda-extender-tls'),
      }),
    ]);
  });

  it('a server that never answers is a finding within the deadline', async () => {
    const server = net.createServer(() => undefined);
    const url = `http://127.0.0.1:${await listen(server)}`;
    const started = Date.now();
    const e = await probeExtender({ url }, undefined, 300);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(e.anonymous).toEqual({ error: 'no answer within 0.3 s' });
  });

  it('attempt turns a thrown error into a fact', async () => {
    expect(await attempt(1000, async () => Promise.reject(new Error('boom')))).toEqual({ error: 'boom' });
  });
});

const postgresUp = await isPostgresReachable();

describe('migration probe', { timeout: 60_000 }, () => {
  it('an unreachable ledger is a finding within the deadline', async () => {
    const r = await attempt(3000, () => probeMigrations('postgres://postgres@127.0.0.1:1/none', 1000));
    expect(r).toHaveProperty('error');
  });

  it.runIf(postgresUp)('names the migrations a PostgreSQL ledger lacks', async () => {
    const t = await createTestDatabase('postgres');
    try {
      expect(judgeMigrations({ migrations: await probeMigrations(t.url!, 3000) } as never).verdict).toBe('ok');
      await t.db.execute(
        sql`delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
      );
      const m = await probeMigrations(t.url!, 3000);
      const finding = judgeMigrations({ migrations: m } as never);
      expect(finding).toMatchObject({ verdict: 'fail', fix: expect.stringMatching(/^vcuda db migrate/) });
      expect(finding.summary).toBe(`1 of ${m.known.length} migration(s) not applied: ${m.known.at(-1)!.tag}`);
      await t.db.execute(sql`drop schema drizzle cascade`);
      expect(judgeMigrations({ migrations: await probeMigrations(t.url!, 3000) } as never).summary).toMatch(
        /^(\d+) of \1 migration\(s\) not applied: 0000_init, /,
      );
    } finally {
      await t.drop();
    }
  });
});
