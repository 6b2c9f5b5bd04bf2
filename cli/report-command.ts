/** `vcuda report NAME --format json|csv [--since --until --cluster ...]`: a ledger report on stdout. */
import type { Command } from 'commander';
import { VcudaError } from '../contract/index.js';
import { closeDb, connectDb } from '../db/connect.js';
import { loadDbConfig } from '../db/db-config.js';
import { pgErrorCode } from '../db/pg-errors.js';
import { formatCsv, type ReportParams, reportNames, runReport } from '../db/reports.js';
import { addDbOptions, type CliOutput, persistentLedger } from './db-command.js';

type ReportFlags = {
  format: string;
  since?: string;
  until?: string;
  cluster?: string;
  groupBy?: string;
  idleBelowPct?: string;
  idleForMinutes?: string;
  limit?: string;
  databaseUrl?: string;
  dataDir?: string;
  url?: string;
};

/** A report from a running control plane's API (`vcuda local` prints its URL). */
async function fetchReport(base: string, name: string, params: ReportParams, format: string): Promise<string> {
  const query = new URLSearchParams({ ...(params as Record<string, string>), format });
  const url = `${base.replace(/\/$/, '')}/api/v1/reports/${encodeURIComponent(name)}?${query}`;
  const res = await fetch(url, { signal: AbortSignal.timeout(15_000) }).catch((err: Error) => {
    throw new VcudaError(
      'unavailable',
      `--url ${base}: no answer (${err.cause ?? err.message}); is the control plane running?`,
    );
  });
  const body = await res.text();
  if (res.ok) return format === 'csv' ? body : `${JSON.stringify(JSON.parse(body), null, 2)}\n`;
  let detail = body;
  try {
    detail = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? body;
  } catch {
    // not JSON: the body as it came
  }
  throw new VcudaError(res.status === 400 ? 'invalid' : 'unavailable', `${url}: HTTP ${res.status}: ${detail}`);
}

const UNDEFINED_TABLE = '42P01';

export function registerReportCommand(program: Command, io: CliOutput = { out: (t) => process.stdout.write(t) }): void {
  addDbOptions(
    program
      .command('report')
      .description(`print a ledger report: ${reportNames.join(', ')}`)
      .argument('<name>', 'report name')
      .option('--format <format>', 'json or csv', 'json')
      .option('--since <date>', 'window start, ISO date (default: 7 days before --until)')
      .option('--until <date>', 'window end, ISO date (default: now)')
      .option('--cluster <name>', 'only this cluster')
      .option(
        '--group-by <key>',
        'gpu-hours: namespace, team or cluster; burst: pod (default), namespace, team or cluster',
      )
      .option('--idle-below-pct <pct>', 'idle: mean SM share below this percent')
      .option('--idle-for-minutes <min>', 'idle: for at least this long')
      .option('--limit <n>', 'top-consumers: how many')
      .option(
        '--url <url>',
        "a running control plane's HTTP URL (e.g. vcuda local's) instead of a database; env VCUDA_URL",
        process.env['VCUDA_URL'] || undefined,
      ),
  ).action(async (name: string, opts: ReportFlags) => {
    if (opts.format !== 'json' && opts.format !== 'csv') {
      throw new VcudaError('invalid', `--format ${opts.format}: must be json or csv`);
    }
    const { format, databaseUrl, dataDir, url, ...rest } = opts;
    const params = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as ReportParams;
    if (url) {
      io.out(await fetchReport(url, name, params, format));
      return;
    }
    const db = await connectDb(persistentLedger(loadDbConfig(process.env, { databaseUrl, dataDir })));
    try {
      const report = await runReport(db, name, params, () => new Date());
      io.out(format === 'csv' ? formatCsv(report) : `${JSON.stringify(report, null, 2)}\n`);
    } catch (err) {
      if (pgErrorCode(err) === UNDEFINED_TABLE) {
        throw new VcudaError('unavailable', 'the ledger has no tables yet: run `vcuda db migrate` first');
      }
      throw err;
    } finally {
      await closeDb(db);
    }
  });
}
