/**
 * A control-plane replica as its own process, so a test can kill it with a real SIGKILL mid-bind:
 * `tsx control-plane-process.ts '<settings JSON>'` starts replica `replica` of a local cluster
 * (its configuration from `replicaConfig`, the ledger at `dbUrl`), prints
 * `ready <http> <https> <extender>` (its ports), and SIGKILLs itself when the first bind reaches
 * `killAt`, every other bind in flight dying with it.
 */
import pino from 'pino';
import type { BindStep } from '../../../control-plane/extender/binder.js';
import { startControlPlane } from '../../../control-plane/server.js';
import { connectDb } from '../../../db/connect.js';
import { type ReplicaConfigSettings, replicaConfig } from '../../../sim/control-plane-replicas.js';
import { kubeConfigFor } from '../../../sim/kubeconfig.js';

export type ControlPlaneProcessSettings = {
  replica: number;
  config: ReplicaConfigSettings;
  dbUrl: string;
  apiUrl: string;
  token: string;
  caPem: string;
  killAt?: BindStep;
};

const settings = JSON.parse(process.argv[2] ?? '{}') as ControlPlaneProcessSettings;
const port = (url: string | undefined) => (url ? new URL(url).port : '0');
const cp = await startControlPlane(replicaConfig(settings.config, settings.replica), {
  db: await connectDb({ url: settings.dbUrl, maxConnections: 8 }),
  kubeConfig: kubeConfigFor(settings.apiUrl, settings.token, settings.caPem),
  logger: pino({ level: settings.config.logLevel }),
  httpsPort: 0,
  bindFaults: (step) => {
    if (step === settings.killAt) process.kill(process.pid, 'SIGKILL');
  },
});
process.stdout.write(`ready ${port(cp.url)} ${port(cp.httpsUrl)} ${port(cp.extenderUrl)}\n`);
