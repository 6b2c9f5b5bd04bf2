/**
 * The connection factory: a `DATABASE_URL`-style url gives postgres.js against a real server;
 * none gives embedded PGlite in a data directory, or in memory when there is none (tests, `npm
 * start`). Both run the same migrations and the same queries through one drizzle type.
 */
import { readFileSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import * as schema from './schema.js';
import { serverTlsOf } from './server-tls.js';

export type VcudaSchema = typeof schema;
export type VcudaDb = PgDatabase<PgQueryResultHKT, VcudaSchema>;

export type DbConfig = {
  /** `postgres://user@host:5432/db`; absent: embedded PGlite. */
  url?: string;
  /** PGlite data directory; absent with no url: in memory. */
  dataDir?: string;
  /** postgres.js pool size (default 10). */
  maxConnections?: number;
  /** A connection attempt that gets no answer within this fails (default 3 s; postgres.js's own is 30 s). */
  connectTimeoutSeconds?: number;
  /** Pooled connections unused this long are closed, so stale ones are not kept forever (default 300 s). */
  idleTimeoutSeconds?: number;
};

/**
 * A session left idle inside a transaction (its client partitioned away mid-transaction) gives up
 * its row locks after this, rather than blocking every other replica's reservation on those rows
 * until TCP notices the client is gone.
 */
const IDLE_IN_TRANSACTION_MS = 30_000;

/**
 * Seconds before the next connection attempt after `retries` failed ones. postgres.js's own grows
 * to 20 s, so after a long outage a recovered ledger would stay unused (and the replica unready)
 * for that long; capped at 2 s, with jitter so replicas do not reconnect in step.
 */
function reconnectBackoffSeconds(retries: number): number {
  return Math.min(0.05 * 2 ** retries, 2) * (0.5 + Math.random() / 2);
}

const closers = new WeakMap<object, () => Promise<void>>();

/** A parameterised query straight to the driver, for the ledger's hot path (no query builder). */
export type RawQuery = (text: string, params: unknown[]) => Promise<Record<string, unknown>[]>;
const rawQueries = new WeakMap<object, RawQuery>();

/** The driver-level query function behind a handle from `connectDb` (undefined for other handles). */
export function rawQueryOf(db: VcudaDb): RawQuery | undefined {
  return rawQueries.get(db);
}

export async function connectDb(config: DbConfig = {}): Promise<VcudaDb> {
  if (config.url) {
    // sslrootcert / PGSSLROOTCERT: the CA that verifies the server (sslmode=verify-full).
    const tls = serverTlsOf(config.url, process.env, (path) => readFileSync(path, 'utf8'));
    const client = postgres(tls.url, {
      ...(tls.ssl ? { ssl: tls.ssl } : {}),
      max: config.maxConnections ?? 10,
      connect_timeout: config.connectTimeoutSeconds ?? 3,
      idle_timeout: config.idleTimeoutSeconds ?? 300,
      backoff: reconnectBackoffSeconds,
      connection: { idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS },
      // Notices (e.g. "schema already exists, skipping") are not worth a log line per start.
      onnotice: () => {},
    });
    const db = drizzlePostgres(client, { schema }) as unknown as VcudaDb;
    closers.set(db, () => client.end({ timeout: 5 }));
    rawQueries.set(db, async (text, params) => [...(await client.unsafe(text, params as never[], { prepare: true }))]);
    return db;
  }
  const client = config.dataDir ? new PGlite(config.dataDir) : new PGlite();
  await client.waitReady;
  const db = drizzlePglite(client, { schema }) as unknown as VcudaDb;
  closers.set(db, () => client.close());
  return db;
}

/** Closes the pool or the embedded database behind a handle from `connectDb`; idempotent. */
export async function closeDb(db: VcudaDb): Promise<void> {
  const close = closers.get(db);
  closers.delete(db);
  await close?.();
}

/** Rows of a raw `db.execute(sql...)`: postgres.js returns an array, PGlite `{ rows }`. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}
