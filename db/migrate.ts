/**
 * Applies the generated migrations in `db/migrations/`. Several control-plane replicas may
 * start at once, so the whole run is one transaction holding an advisory lock: the second
 * replica waits, then finds nothing left to do. The bookkeeping table is drizzle's own
 * (`drizzle.__drizzle_migrations`), so drizzle-kit tooling keeps working; drizzle's migrator
 * is not used because it reads the applied list before it takes any lock.
 */
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { rowsOf, type VcudaDb } from './connect.js';

/** Arbitrary but fixed: 'vcuda-mg' as a 64-bit integer. Every replica must use the same key. */
export const MIGRATION_LOCK_KEY = 0x7663756461_6d67n;

export const MIGRATIONS_FOLDER = fileURLToPath(new URL('./migrations', import.meta.url));

export type MigrateResult = { applied: number; total: number };

export async function migrate(db: VcudaDb, migrationsFolder = MIGRATIONS_FOLDER): Promise<MigrateResult> {
  const migrations = readMigrationFiles({ migrationsFolder });
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY.toString()}::bigint)`);
    await tx.execute(sql`create schema if not exists drizzle`);
    await tx.execute(
      sql`create table if not exists drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)`,
    );
    const last = rowsOf<{ created_at: string | number | null }>(
      await tx.execute(sql`select created_at from drizzle.__drizzle_migrations order by created_at desc limit 1`),
    )[0];
    const lastMillis = last?.created_at == null ? -1 : Number(last.created_at);
    let applied = 0;
    for (const migration of migrations) {
      if (migration.folderMillis <= lastMillis) continue;
      for (const statement of migration.sql) {
        if (statement.trim()) await tx.execute(sql.raw(statement));
      }
      await tx.execute(
        sql`insert into drizzle.__drizzle_migrations (hash, created_at) values (${migration.hash}, ${migration.folderMillis})`,
      );
      applied += 1;
    }
    return { applied, total: migrations.length };
  });
}
