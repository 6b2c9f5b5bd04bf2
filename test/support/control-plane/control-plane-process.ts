/**
 * A control plane as its own process, so a test can kill it with a real SIGKILL mid-bind and a
 * benchmark can tell its event loop and CPU from its own: `tsx control-plane-process.ts '<settings
 * JSON>'` starts either replica `replica` of a local cluster (its configuration from
 * `replicaConfig`) or a control plane of the given flags on a kubeconfig file, with the ledger at
 * `dbUrl`, prints `ready <http> <https> <extender>` (its ports), and SIGKILLs itself when the first
 * bind reaches `killAt`, every other bind in flight dying with it (or, at `pauseAt`, holds that bind
 * there for its parent to SIGKILL it when the test is ready). Over an IPC channel (where the
 * parent opened one) it measures its event-loop delay between 'lag-start' and 'lag-stop'.
 */
import pino from 'pino';
import { type ControlPlaneConfigInput, loadControlPlaneConfig } from '../../../control-plane/config.js';
import type { BindStep } from '../../../control-plane/extender/binder.js';
import { tuneHeapForLongLivedConnections } from '../../../control-plane/heap-tuning.js';
import { startControlPlane } from '../../../control-plane/server.js';
import { connectDb } from '../../../db/connect.js';
import { PooledKubeConfig } from '../../../kube-connections/pooled-kube-config.js';
import { type ReplicaConfigSettings, replicaConfig } from '../../../sim/control-plane-replicas.js';
import { kubeConfigFor } from '../../../sim/kubeconfig.js';
import { answerLagProbes } from '../lag-probe.js';

/** A local cluster's replica, reaching the simulated API server with a token. */
type LocalReplica = { replica: number; config: ReplicaConfigSettings; apiUrl: string; token: string; caPem: string };
/** A control plane of these flags, reaching a real API server with the kubeconfig at this path. */
type OnKubeconfig = { flags: ControlPlaneConfigInput; kubeconfigPath: string; httpsPort: number };

export type ControlPlaneProcessSettings = (LocalReplica | OnKubeconfig) & {
  dbUrl: string;
  /** The bind step where it SIGKILLs itself. */
  killAt?: BindStep;
  /** The bind step where the first bind to reach it says `paused <pod uid>` and waits for its parent's SIGKILL. */
  pauseAt?: BindStep;
};

function configAndKube(s: ControlPlaneProcessSettings) {
  if ('flags' in s) {
    const kubeConfig = new PooledKubeConfig();
    kubeConfig.loadFromFile(s.kubeconfigPath);
    // The ledger's connections as an in-process control plane on a real cluster has them.
    return { config: loadControlPlaneConfig({ flags: s.flags }), kubeConfig, httpsPort: s.httpsPort, connections: 10 };
  }
  return {
    config: replicaConfig(s.config, s.replica),
    kubeConfig: kubeConfigFor(s.apiUrl, s.token, s.caPem),
    httpsPort: 0,
    connections: 8,
  };
}

const settings = JSON.parse(process.argv[2] ?? '{}') as ControlPlaneProcessSettings;
// As `vcuda control-plane` sets its collector up (heap-tuning.ts).
tuneHeapForLongLivedConnections();
let paused = false;
const { config, kubeConfig, httpsPort, connections } = configAndKube(settings);
const port = (url: string | undefined) => (url ? new URL(url).port : '0');
const cp = await startControlPlane(config, {
  db: await connectDb({ url: settings.dbUrl, maxConnections: connections }),
  kubeConfig,
  logger: pino({ level: config.logLevel }),
  httpsPort,
  bindFaults: async (step, podUid) => {
    if (step === settings.killAt) process.kill(process.pid, 'SIGKILL');
    if (step !== settings.pauseAt || paused) return;
    paused = true;
    process.stdout.write(`paused ${podUid}\n`);
    await new Promise(() => undefined);
  },
});
if (process.send) answerLagProbes();
// A clean stop, so a profiled run (--cpu-prof) writes its profile.
process.once('SIGTERM', () => void cp.close().finally(() => process.exit(0)));
process.stdout.write(`ready ${port(cp.url)} ${port(cp.httpsUrl)} ${port(cp.extenderUrl)}\n`);
