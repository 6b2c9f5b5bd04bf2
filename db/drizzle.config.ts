/** drizzle-kit's view of the ledger: `npx drizzle-kit generate --config db/drizzle.config.ts`. */
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './db/schema.ts',
  out: './db/migrations',
});
