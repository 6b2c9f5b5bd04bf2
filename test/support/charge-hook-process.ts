/**
 * The ledger's charge hook as its own process, so a test can kill it with SIGKILL mid-charge, as a
 * crash of the control plane would: `tsx charge-hook-process.ts '<settings JSON>'` connects to the
 * PostgreSQL ledger, serves the hook on a loopback port and prints `ready <url>`.
 */
import { connectDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { serveChargeHook } from './dra-real.js';

type Settings = { dbUrl: string; cluster: string; keyPem: string; certPem: string };

const settings = JSON.parse(process.argv[2] ?? '{}') as Settings;
const db = await connectDb({ url: settings.dbUrl, maxConnections: 4 });
const ledger = createLedger(db, { clock: () => new Date() });
const server = await serveChargeHook({
  ledger,
  cluster: settings.cluster,
  tls: { keyPem: settings.keyPem, certPem: settings.certPem },
});
process.stdout.write(`ready ${server.url}\n`);
