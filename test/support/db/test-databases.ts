/**
 * Test support: the same suite runs on embedded PGlite and on a real PostgreSQL server. Each
 * test file gets a fresh database (`vcuda_test_<random>`) so parallel files never collide.
 * The server defaults to `postgres://postgres@127.0.0.1:5432/postgres`
 * (`VCUDA_TEST_DATABASE_URL` overrides it); when it is unreachable the Postgres variant is
 * skipped, and the file shows a skipped test named after the server it could not reach.
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { closeDb, connectDb, type VcudaDb } from '../../../db/connect.js';
import { migrate } from '../../../db/migrate.js';

export const ADMIN_URL = process.env.VCUDA_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export type TestDbKind = 'pglite' | 'postgres';

let reachable: Promise<boolean> | undefined;

export function isPostgresReachable(): Promise<boolean> {
  reachable ??= (async () => {
    const sql = postgres(ADMIN_URL, { max: 1, connect_timeout: 3, onnotice: () => {} });
    try {
      await sql`select 1`;
      return true;
    } catch {
      // The caller decides what an unreachable server means (a visible skip, or a failed benchmark).
      return false;
    } finally {
      await sql.end({ timeout: 1 });
    }
  })();
  return reachable;
}

export type TestDatabase = {
  kind: TestDbKind;
  /** Connection url of the fresh database (Postgres only). */
  url?: string;
  /** Opens another handle on the same database (Postgres: another pool; PGlite: the same one). */
  open: (maxConnections?: number) => Promise<VcudaDb>;
  db: VcudaDb;
  drop: () => Promise<void>;
};

/** A fresh, migrated database of the given kind. */
export async function createTestDatabase(kind: TestDbKind): Promise<TestDatabase> {
  if (kind === 'pglite') {
    const db = await connectDb({});
    await migrate(db);
    return { kind, db, open: async () => db, drop: () => closeDb(db) };
  }
  const dbName = `vcuda_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${dbName}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${dbName}`;
  const opened: VcudaDb[] = [];
  const open = async (maxConnections = 4) => {
    const db = await connectDb({ url: url.toString(), maxConnections });
    opened.push(db);
    return db;
  };
  const db = await open();
  await migrate(db);
  return {
    kind,
    url: url.toString(),
    db,
    open,
    drop: async () => {
      for (const handle of opened) await closeDb(handle);
      await admin.unsafe(`drop database if exists ${dbName} with (force)`);
      await admin.end({ timeout: 2 });
    },
  };
}

/** The kinds to run: PGlite always, Postgres when reachable (else a visible skip, see below). */
export async function testDbKinds(): Promise<TestDbKind[]> {
  return (await postgresForTests()) ? ['pglite', 'postgres'] : ['pglite'];
}

/**
 * Whether PostgreSQL is reachable; when it is not, a test file that calls this at its top level
 * shows a skipped test saying so, so a missing server is never mistaken for a passing variant.
 */
export async function postgresForTests(): Promise<boolean> {
  if (await isPostgresReachable()) return true;
  // Outside vitest (a benchmark run) there is no test to show, and the caller reports it.
  if (process.env.VITEST) {
    const { it } = await import('vitest');
    const { host, port } = new URL(ADMIN_URL);
    it.skip(`skipped: PostgreSQL unreachable at ${host}${port ? '' : ':5432'} (its variant of this file)`, () => {});
  }
  return false;
}
