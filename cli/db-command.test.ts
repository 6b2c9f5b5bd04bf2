import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { Command } from 'commander';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import { reportsRoutes } from '../control-plane/api/reports-routes.js';
import { closeDb, connectDb } from '../db/connect.js';
import { loadDbConfig } from '../db/db-config.js';
import { MIGRATIONS_FOLDER, migrate } from '../db/migrate.js';
import { reportNames, runReport } from '../db/reports.js';
import { registerDbCommand } from './db-command.js';
import { registerReportCommand } from './report-command.js';

const dir = mkdtempSync(join(tmpdir(), 'vcuda-db-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(...args: string[]): Promise<string> {
  let text = '';
  const io = { out: (t: string) => (text += t) };
  const program = new Command('vcuda').exitOverride();
  registerDbCommand(program, io);
  registerReportCommand(program, io);
  await program.parseAsync(['node', 'vcuda', ...args]);
  return text;
}

// PGlite on disk starts slowly on a busy machine (its initdb), hence the long timeout.
describe('vcuda db migrate / vcuda report', { timeout: 120_000 }, () => {
  it('refuses a report before the tables exist, with the fix named', async () => {
    await expect(run('report', 'quota-usage', '--data-dir', join(dir, 'empty'))).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining('vcuda db migrate'),
    });
  });

  it('migrates a PGlite directory once, then reports from it as JSON and CSV', async () => {
    const data = join(dir, 'ledger');
    const total = readMigrationFiles({ migrationsFolder: MIGRATIONS_FOLDER }).length;
    expect(await run('db', 'migrate', '--data-dir', data)).toContain(`${total} applied, 0 already there`);
    expect(await run('db', 'migrate', '--data-dir', data)).toContain(`0 applied, ${total} already there`);
    const json = JSON.parse(await run('report', 'fragmentation', '--data-dir', data)) as { rows: unknown[] };
    expect(json.rows).toEqual([]);
    expect(await run('report', 'quota-usage', '--format', 'csv', '--data-dir', data)).toBe(
      'quota,scope,subject,gpuModel,coreLimit,coreUsed,corePct,memoryLimitMiB,memoryUsedMiB,memoryPct\r\n',
    );
    await expect(run('report', 'idle', '--format', 'xml', '--data-dir', data)).rejects.toThrow(/json or csv/);
  });

  it('refuses to migrate or report on a throwaway in-memory ledger, naming what to give', async () => {
    for (const args of [
      ['db', 'migrate'],
      ['report', 'quota-usage'],
    ]) {
      await expect(run(...args)).rejects.toThrow(
        'no ledger named: give --database-url postgres://… ($DATABASE_URL) or --data-dir DIR ($VCUDA_DATA_DIR)',
      );
    }
  });

  it('reads a report from a running control plane with --url', async () => {
    const db = await connectDb({});
    await migrate(db);
    const api = new Hono().route(
      '/api/v1',
      reportsRoutes({
        reports: { names: reportNames, run: (name, params) => runReport(db, name, params, () => new Date()) },
      }),
    );
    const server = serve({ fetch: api.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((resolve) => server.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect(await run('report', 'quota-usage', '--format', 'csv', '--url', url)).toBe(
        'quota,scope,subject,gpuModel,coreLimit,coreUsed,corePct,memoryLimitMiB,memoryUsedMiB,memoryPct\r\n',
      );
      expect(JSON.parse(await run('report', 'fragmentation', '--url', url))).toMatchObject({ rows: [] });
    } finally {
      server.close();
      await closeDb(db);
    }
  });

  it('says when no control plane answers at --url', async () => {
    await expect(run('report', 'idle', '--url', 'http://127.0.0.1:1')).rejects.toThrow(
      /--url http:\/\/127\.0\.0\.1:1: no answer .*is the control plane running\?/,
    );
  });

  it('builds the db config from flags over the environment, and names a bad field', () => {
    expect(loadDbConfig({ VCUDA_DATA_DIR: '/y' })).toEqual({ dataDir: '/y' });
    expect(loadDbConfig({ DATABASE_URL: 'postgres://a/b' }, {})).toEqual({ url: 'postgres://a/b' });
    expect(loadDbConfig({ DATABASE_URL: 'postgres://a/b' }, { databaseUrl: 'postgresql://c/d' })).toEqual({
      url: 'postgresql://c/d',
    });
    expect(loadDbConfig({ VCUDA_DB_DATA_DIR: '/x', VCUDA_DB_MAX_CONNECTIONS: '3' })).toEqual({
      dataDir: '/x',
      maxConnections: 3,
    });
    expect(() => loadDbConfig({ DATABASE_URL: 'mysql://a' })).toThrow(/db\.url: must be a postgres/);
  });
});
