/** `vcuda db migrate`: applies the ledger's migrations (safe while other replicas do the same). */
import type { Command } from 'commander';
import { VcudaError } from '../contract/index.js';
import { closeDb, connectDb, type DbConfig } from '../db/connect.js';
import { loadDbConfig } from '../db/db-config.js';
import { migrate } from '../db/migrate.js';

export type CliOutput = { out: (text: string) => void };
const stdout: CliOutput = { out: (text) => process.stdout.write(text) };

export function addDbOptions(command: Command): Command {
  return command
    .option('--database-url <url>', 'PostgreSQL url (default: $DATABASE_URL; none: embedded PGlite)')
    .option('--data-dir <dir>', 'PGlite data directory when no url is given (default: $VCUDA_DATA_DIR)');
}

/**
 * Admin commands act on a ledger that outlives them: with neither a url nor a data directory
 * they would open an empty in-memory database, migrate or read it, and throw it away.
 */
export function persistentLedger(config: DbConfig): DbConfig {
  if (config.url || config.dataDir) return config;
  throw new VcudaError(
    'invalid',
    'no ledger named: give --database-url postgres://… ($DATABASE_URL) or --data-dir DIR ($VCUDA_DATA_DIR); ' +
      'without either the ledger would be an empty in-memory one',
  );
}

export function registerDbCommand(program: Command, io: CliOutput = stdout): void {
  const db = program.command('db').description('the quota ledger database');
  addDbOptions(db.command('migrate').description('create or update the ledger tables')).action(
    async (opts: { databaseUrl?: string; dataDir?: string }) => {
      const config = persistentLedger(loadDbConfig(process.env, opts));
      const handle = await connectDb(config);
      try {
        const { applied, total } = await migrate(handle);
        const where = config.url ? new URL(config.url).host : (config.dataDir ?? 'memory');
        io.out(`migrated ${where}: ${applied} applied, ${total - applied} already there\n`);
      } finally {
        await closeDb(handle);
      }
    },
  );
}
