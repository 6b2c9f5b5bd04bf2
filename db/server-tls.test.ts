/**
 * sslmode=verify-full with a private CA: the pure mapping from url and environment to postgres.js
 * options, and a real TLS handshake against a server whose certificate that CA signed (accepted)
 * or another CA signed (refused before any credential is sent).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCertificateAuthority, issueLeafCertificate } from '../webhooks/certificates.js';
import { closeDb, connectDb } from './connect.js';
import { serverTlsOf } from './server-tls.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const files = (path: string) => {
  if (path === '/ca/ca.crt') return PEM;
  if (path === '/ca/empty') return '';
  throw new Error(`ENOENT: no such file, open '${path}'`);
};

describe('serverTlsOf', () => {
  it('verifies the server with the CA named by sslrootcert, and keeps the parameter from the server', () => {
    const r = serverTlsOf('postgres://u:p@db.example:5432/vcuda?sslmode=verify-full&sslrootcert=/ca/ca.crt', {}, files);
    expect(r.url).toBe('postgres://u:p@db.example:5432/vcuda');
    expect(r.ssl).toEqual({ ca: PEM, rejectUnauthorized: true });
  });

  it('takes the CA from PGSSLROOTCERT when the url names none', () => {
    const r = serverTlsOf('postgres://db.example/vcuda?sslmode=verify-full', { PGSSLROOTCERT: '/ca/ca.crt' }, files);
    expect(r.ssl?.ca).toBe(PEM);
    expect(r.ssl?.checkServerIdentity).toBeUndefined();
  });

  it('checks only the CA, not the host name, for verify-ca and for require with a CA (as libpq)', () => {
    for (const mode of ['verify-ca', 'require']) {
      const r = serverTlsOf(`postgres://10.0.0.5/vcuda?sslmode=${mode}&sslrootcert=/ca/ca.crt`, {}, files);
      expect(r.ssl?.rejectUnauthorized, mode).toBe(true);
      expect(r.ssl?.checkServerIdentity?.('db', {} as tls.PeerCertificate), mode).toBeUndefined();
    }
  });

  it('leaves urls without a CA, or with sslrootcert=system, to postgres.js', () => {
    for (const url of ['postgres://db/vcuda?sslmode=verify-full', 'postgres://db/vcuda?sslrootcert=system']) {
      expect(serverTlsOf(url, {}, files)).toEqual({ url });
    }
  });

  it('drops a CA that a non-verifying mode would not use, rather than send it to the server', () => {
    const r = serverTlsOf('postgres://db/vcuda?sslmode=prefer&sslrootcert=/ca/ca.crt', {}, files);
    expect(r).toEqual({ url: 'postgres://db/vcuda?sslmode=prefer' });
  });

  it('names the setting and the file when the CA cannot be read or is not PEM', () => {
    expect(() => serverTlsOf('postgres://db/v?sslmode=verify-full&sslrootcert=/ca/missing', {}, files)).toThrow(
      /^database url sslrootcert: cannot read the CA file \/ca\/missing: ENOENT/,
    );
    expect(() => serverTlsOf('postgres://db/v?sslmode=verify-full', { PGSSLROOTCERT: '/ca/empty' }, files)).toThrow(
      'PGSSLROOTCERT: /ca/empty holds no PEM certificate',
    );
  });
});

/** A PostgreSQL ErrorResponse message (FATAL): the client gives up on the connection at once. */
function fatal(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

/**
 * A PostgreSQL server's TLS front: answers the SSLRequest with `S`, then completes the handshake
 * with `cert`, counts the startup messages (user, database) that reach it over TLS and answers
 * each with a FATAL error.
 */
async function startTlsFront(cert: { certPem: string; keyPem: string }) {
  let startups = 0;
  const context = tls.createSecureContext({ cert: cert.certPem, key: cert.keyPem });
  const server = net.createServer((socket) => {
    socket.once('data', () => {
      socket.write('S');
      const secure = new tls.TLSSocket(socket, { isServer: true, secureContext: context });
      secure.once('data', () => {
        startups += 1;
        secure.end(fatal('28000', 'TLS front: no PostgreSQL behind it'));
      });
      secure.on('error', () => secure.destroy());
    });
    socket.on('error', () => socket.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    startups: () => startups,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('connectDb with sslmode=verify-full and a private CA', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-db-ca-'));
  let front: Awaited<ReturnType<typeof startTlsFront>>;
  beforeAll(async () => {
    const now = new Date();
    const until = new Date(now.getTime() + 86_400_000);
    const ca = await issueCertificateAuthority('ledger CA', now, until);
    const other = await issueCertificateAuthority('another CA', now, until);
    const serving = await issueLeafCertificate(
      ca,
      { dnsNames: ['localhost'], ipAddresses: [], usage: 'server' },
      now,
      until,
    );
    writeFileSync(join(dir, 'ca.crt'), ca.certPem);
    writeFileSync(join(dir, 'other.crt'), other.certPem);
    front = await startTlsFront(serving);
  });
  afterAll(async () => {
    await front.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** One query: what it failed with, and whether its startup message reached the server over TLS. */
  const attempt = async (caFile: string) => {
    const url = `postgres://vcuda@localhost:${front.port}/vcuda?sslmode=verify-full&sslrootcert=${caFile}`;
    const db = await connectDb({ url, connectTimeoutSeconds: 2 });
    const before = front.startups();
    const failed = db.execute('select 1').then(
      () => 'answered',
      (err: Error) => String((err.cause as Error | undefined)?.message ?? err.message),
    );
    const outcome = await failed;
    await closeDb(db);
    return { outcome, startupSent: front.startups() > before };
  };

  it('talks to the server its CA signed', async () => {
    expect(await attempt(join(dir, 'ca.crt'))).toEqual({
      outcome: 'TLS front: no PostgreSQL behind it',
      startupSent: true,
    });
  });

  it('refuses a server another CA signed, before any credential goes out', async () => {
    const r = await attempt(join(dir, 'other.crt'));
    expect(r.outcome).toMatch(/self[- ]signed|unable to verify|certificate/i);
    expect(r.startupSent).toBe(false);
  });
});
