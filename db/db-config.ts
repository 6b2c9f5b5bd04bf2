/**
 * The ledger's slice of a process's configuration, built once by a `main` or a CLI command:
 * flags win over the environment (`DATABASE_URL`, `VCUDA_DATA_DIR`, `VCUDA_DB_MAX_CONNECTIONS`,
 * `VCUDA_DB_CONNECT_TIMEOUT_SECONDS`). `VCUDA_DB_DATA_DIR` is the older name of `VCUDA_DATA_DIR`, still read.
 */
import { z } from 'zod';
import { fieldErrorsFromZod, ValidationError } from '../contract/index.js';
import type { DbConfig } from './connect.js';

const dbConfigSchema = z.object({
  url: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// url')
    .optional(),
  dataDir: z.string().min(1).optional(),
  maxConnections: z.coerce.number().int().min(1).max(1_000).optional(),
  connectTimeoutSeconds: z.coerce.number().int().min(1).max(300).optional(),
});

export function loadDbConfig(
  env: Record<string, string | undefined>,
  flags: { databaseUrl?: string; dataDir?: string; maxConnections?: string | number } = {},
): DbConfig {
  const raw = {
    url: flags.databaseUrl ?? (env.DATABASE_URL || undefined),
    dataDir: flags.dataDir ?? (env.VCUDA_DATA_DIR || env.VCUDA_DB_DATA_DIR || undefined),
    maxConnections: flags.maxConnections ?? (env.VCUDA_DB_MAX_CONNECTIONS || undefined),
    connectTimeoutSeconds: env.VCUDA_DB_CONNECT_TIMEOUT_SECONDS || undefined,
  };
  const parsed = dbConfigSchema.safeParse(raw);
  if (!parsed.success)
    throw new ValidationError(fieldErrorsFromZod(parsed.error.issues, 'db'), 'database configuration');
  const out: DbConfig = {};
  if (parsed.data.url) out.url = parsed.data.url;
  if (parsed.data.dataDir) out.dataDir = parsed.data.dataDir;
  if (parsed.data.maxConnections) out.maxConnections = parsed.data.maxConnections;
  if (parsed.data.connectTimeoutSeconds) out.connectTimeoutSeconds = parsed.data.connectTimeoutSeconds;
  return Object.freeze(out);
}
