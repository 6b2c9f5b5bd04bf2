/**
 * libpq's way of trusting a database server's CA, for postgres.js: `sslmode=verify-full` (or
 * `verify-ca`) with the CA file from the url's `sslrootcert=FILE` or from `PGSSLROOTCERT`.
 * postgres.js on its own verifies only against Node's bundled CAs, and would pass an unknown
 * `sslrootcert` on to the server as a setting, which the server refuses. Pure: the file is read
 * through `readFile`.
 */
import type { ConnectionOptions } from 'node:tls';

export type ServerTls = {
  /** The url to give postgres.js, without the parameters handled here. */
  url: string;
  /** postgres.js's `ssl` option; undefined leaves the url's own `sslmode` in charge. */
  ssl?: ConnectionOptions;
};

type Env = Readonly<Record<string, string | undefined>>;

/** Modes that check the server's certificate against a CA; verify-ca skips the host name. */
const VERIFYING = new Set(['verify-full', 'verify-ca']);

export function serverTlsOf(url: string, env: Env, readFile: (path: string) => string): ServerTls {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { url }; // several hosts (postgres://a,b/db) are not a URL; postgres.js parses them itself
  }
  const fromUrl = parsed.searchParams.get('sslrootcert');
  const rootCert = fromUrl ?? env['PGSSLROOTCERT'] ?? '';
  // `system` means Node's bundled CAs, which postgres.js handles itself.
  if (rootCert === '' || rootCert === 'system') return { url };
  parsed.searchParams.delete('sslrootcert');
  // libpq: with a root certificate present, `require` verifies the CA as `verify-ca` does.
  const given = parsed.searchParams.get('sslmode') ?? '';
  const mode = given === 'require' ? 'verify-ca' : given;
  if (!VERIFYING.has(mode)) return { url: parsed.toString() };
  let ca: string;
  try {
    ca = readFile(rootCert);
  } catch (err) {
    const source = fromUrl !== null ? 'database url sslrootcert' : 'PGSSLROOTCERT';
    throw new Error(`${source}: cannot read the CA file ${rootCert}: ${(err as Error).message}`);
  }
  if (!ca.includes('-----BEGIN CERTIFICATE-----')) {
    throw new Error(
      `${fromUrl !== null ? 'database url sslrootcert' : 'PGSSLROOTCERT'}: ${rootCert} holds no PEM certificate`,
    );
  }
  parsed.searchParams.delete('sslmode');
  const ssl: ConnectionOptions = { ca, rejectUnauthorized: true };
  if (mode === 'verify-ca') ssl.checkServerIdentity = () => undefined;
  return { url: parsed.toString(), ssl };
}
