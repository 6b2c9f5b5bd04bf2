import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { ADMIN_URL, postgresForTests } from '../test/support/db/test-databases.js';
import { closeDb, connectDb, rowsOf } from './connect.js';
import { MIGRATIONS_FOLDER, migrate } from './migrate.js';

type JournalEntry = { tag: string; when: number };
const JOURNAL = (
  JSON.parse(readFileSync(`${MIGRATIONS_FOLDER}/meta/_journal.json`, 'utf8')) as { entries: JournalEntry[] }
).entries;
/** Every migration the journal lists (each one added is counted without editing this file). */
const ALL = JOURNAL.length;

const reachable = await postgresForTests();

describe('migrate', () => {
  it('finds each migration later than the one before it, so a ledger migrated before applies the next', () => {
    // migrate() applies what is newer than the last applied `when`: one dated earlier would be skipped.
    const late = JOURNAL.filter((e, i) => i > 0 && e.when <= JOURNAL[i - 1]!.when).map((e) => e.tag);
    expect(late).toEqual([]);
  });

  it('creates every table on PGlite and is a no-op the second time', { timeout: 120_000 }, async () => {
    const db = await connectDb({});
    try {
      expect(await migrate(db)).toEqual({ applied: ALL, total: ALL });
      expect(await migrate(db)).toEqual({ applied: 0, total: ALL });
      const tables = rowsOf<{ t: string }>(
        await db.execute(sql`select tablename as t from pg_tables where schemaname = 'public' order by 1`),
      ).map((r) => r.t);
      expect(tables).toEqual([
        'allocation_days',
        'allocations',
        'cards',
        'clusters',
        'nodes',
        'pod_holds',
        'quotas',
        'replica_leases',
        'team_namespaces',
        'usage_days',
        'usage_samples',
      ]);
    } finally {
      await closeDb(db);
    }
  });

  describe.skipIf(!reachable)('on PostgreSQL', () => {
    const dbName = `vcuda_test_${randomBytes(6).toString('hex')}`;
    const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    afterAll(async () => {
      await admin.unsafe(`drop database if exists ${dbName} with (force)`);
      await admin.end({ timeout: 2 });
    });

    it('lets replicas that start together migrate once: the advisory lock serialises them', async () => {
      await admin.unsafe(`create database ${dbName}`);
      const url = new URL(ADMIN_URL);
      url.pathname = `/${dbName}`;
      const replicas = await Promise.all(
        Array.from({ length: 4 }, () => connectDb({ url: url.toString(), maxConnections: 1 })),
      );
      try {
        const results = await Promise.all(replicas.map((db) => migrate(db)));
        expect(results.map((r) => r.applied).sort()).toEqual([0, 0, 0, ALL]);
        const rows = rowsOf<{ n: number }>(
          await (replicas[0] as (typeof replicas)[number]).execute(
            sql`select count(*)::int as n from drizzle.__drizzle_migrations`,
          ),
        );
        expect(rows[0]?.n).toBe(ALL);
      } finally {
        for (const db of replicas) await closeDb(db);
      }
    });
  });
});
