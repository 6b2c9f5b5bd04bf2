/**
 * What `vcuda local` does once its flags are parsed, one named step at a time: read the flags into
 * settings, prepare the cluster and its workload, start the simulated cluster, say where
 * everything is, run the workload and the summary, and stop everything on Ctrl-C. Loaded only by
 * `vcuda local`, so other commands never load the simulator.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { resourceNames } from '../contract/index.js';
import { tuneHeapForLongLivedConnections } from '../control-plane/heap-tuning.js';
import type { ServedVersion } from '../sim/apiserver/discovery.js';
import { type ClusterSpec, DEFAULT_CLUSTER, expandNodes, loadClusterSpec } from '../sim/cluster-spec.js';
import { installDeviceClass, type LocalCluster, startLocalCluster, WORKLOAD_DIR } from '../sim/local-cluster.js';
import { defaultLocalDataDir } from '../sim/local-ledger.js';
import { DEFAULT_HEARTBEAT_LIMIT_SECONDS, formatSummary, readSummary } from '../sim/local-summary.js';
import { DEMO_QUOTAS, demoWorkload } from '../sim/traces/demo-workload.js';
import { startWorkloadGenerator } from '../sim/traces/workload-generator.js';
import { expandWorkload, loadWorkloadSpec, type WorkloadSpec } from '../sim/traces/workload-spec.js';
import { localDoctorCommand } from './doctor-command.js';

export type LocalFlags = {
  port: string;
  resourceDomain: string;
  memoryUnitMib?: string;
  cluster?: string;
  workload?: string;
  replicas: string;
  database?: string;
  dataDir?: string;
  timeScale: string;
  logLevel: string;
  summaryEvery: string;
  kubernetesVersion: string;
  nodeProcesses?: boolean;
  dra?: boolean;
};

export const SERVED_VERSIONS = ['1.26', '1.32', '1.36'] as const;

type Settings = {
  port: number;
  replicas: number;
  timeScale: number;
  kubernetesVersion: ServedVersion;
  domain: ReturnType<typeof resourceNames>;
  memoryUnitMiB: number | undefined;
  /** PGlite's directory when no --database is given. */
  dataDir: string | undefined;
  summaryMs: number;
};

const out = (line: string) => process.stdout.write(`${line}\n`);

function wholeNumber(flag: string, raw: string, min: number, max: number, what = `${min}..${max}`): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${flag} must be ${what}, not "${raw}"`);
  return n;
}

/** Every flag checked, each bad one named with its rule. */
export function readSettings(flags: LocalFlags): Settings {
  const timeScale = Number(flags.timeScale);
  if (!(timeScale > 0)) throw new Error(`--time-scale must be a positive number, not "${flags.timeScale}"`);
  const asked = SERVED_VERSIONS.find((v) => v === flags.kubernetesVersion);
  if (!asked)
    throw new Error(`--kubernetes-version must be ${SERVED_VERSIONS.join(' or ')}, not "${flags.kubernetesVersion}"`);
  // DRA mode is a 1.36 cluster; the default version (1.26) gives way, another one asked does not.
  if (flags.dra && asked === '1.32') throw new Error('--dra is a Kubernetes 1.36 cluster, not 1.32');
  const kubernetesVersion = flags.dra ? '1.36' : asked;
  const memoryUnitMiB =
    flags.memoryUnitMib === undefined
      ? undefined
      : wholeNumber('--memory-unit-mib', flags.memoryUnitMib, 1, 65536, 'a whole number of MiB from 1 to 65536');
  return {
    port: wholeNumber('--port', flags.port, 0, 65535),
    replicas: wholeNumber('--replicas', flags.replicas, 1, 5),
    timeScale,
    kubernetesVersion,
    domain: resourceNames(flags.resourceDomain),
    memoryUnitMiB,
    dataDir: flags.database ? undefined : flags.dataDir || defaultLocalDataDir(),
    summaryMs: Math.max(1, Number(flags.summaryEvery)) * 1000,
  };
}

/** The CUDA test program for simulated pods; without a C compiler or the fake driver, pods idle. */
function buildWorkloadProgram(): boolean {
  try {
    execFileSync('make', ['-s', '-C', join(WORKLOAD_DIR, '..', '..')], { stdio: 'ignore' });
  } catch {
    // reported at start when the program is missing
  }
  return existsSync(`${WORKLOAD_DIR}/cuda-workload`);
}

/** The cluster description (with the demo's quotas when the demo runs) and the workload to replay. */
async function prepareClusterAndWorkload(
  flags: LocalFlags,
  settings: Settings,
  hasWorkloadBinary: boolean,
): Promise<{ cluster: ClusterSpec; spec: WorkloadSpec | undefined }> {
  const fromFile = flags.cluster ? await loadClusterSpec(flags.cluster) : DEFAULT_CLUSTER;
  const base = settings.memoryUnitMiB === undefined ? fromFile : { ...fromFile, memoryUnitMiB: settings.memoryUnitMiB };
  // The demo shows the extender's placement; a 1.36 cluster (cards through claims) starts empty unless a trace is named.
  const dra = settings.kubernetesVersion === '1.36';
  if (flags.workload === 'none' || (dra && !flags.workload)) return { cluster: base, spec: undefined };
  if (flags.workload) return { cluster: base, spec: await loadWorkloadSpec(flags.workload) };
  const cluster = { ...base, quotas: { ...DEMO_QUOTAS, ...base.quotas } };
  const command = (allocMiB: number, busyPercent: number) =>
    hasWorkloadBinary
      ? [
          'cuda-workload',
          '--alloc-mib',
          String(allocMiB),
          '--hold-seconds',
          '86400',
          '--busy-percent',
          String(busyPercent),
        ]
      : undefined;
  return { cluster, spec: demoWorkload((_limitMiB, allocMiB, busy) => command(allocMiB, busy), cluster.memoryUnitMiB) };
}

async function startCluster(flags: LocalFlags, settings: Settings, cluster: ClusterSpec): Promise<LocalCluster> {
  return startLocalCluster({
    cluster,
    port: settings.port,
    resourceDomain: settings.domain.domain,
    replicas: settings.replicas,
    ...(flags.database ? { databaseUrl: flags.database } : {}),
    ...(settings.dataDir ? { dataDir: settings.dataDir } : {}),
    logLevel: flags.logLevel as 'warn',
    schedulerBackoffMs: { initial: 500, max: 5000 },
    kubernetesVersion: settings.kubernetesVersion,
    nodeProcesses: flags.nodeProcesses === true,
  }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EADDRINUSE') throw err;
    throw new Error(`port ${settings.port} is in use; pick another with --port N (npm start -- --port N) or PORT=N`);
  });
}

/** Where the dashboard, the API, the kubeconfig, the ledger and doctor are. */
function printWhereEverythingIs(lc: LocalCluster, flags: LocalFlags, settings: Settings, hasWorkloadBinary: boolean) {
  out(`  dashboard    ${lc.url}/`);
  out(`  API          ${lc.url}/api/v1/...   metrics ${lc.url}/metrics   health ${lc.url}/healthz`);
  out(`  reports      vcuda report quota-usage --url ${lc.url}`);
  out(`  kubeconfig   ${lc.kubeconfigPath}`);
  out(`               export KUBECONFIG=${lc.kubeconfigPath}; kubectl get pods -A -o wide`);
  out(`  doctor       ${localDoctorCommand(lc, flags.database)}`);
  if (settings.dataDir) {
    out(
      `  ledger       ${settings.dataDir} (embedded PGlite, kept across restarts; --database postgres://... for PostgreSQL)`,
    );
    out(`  quotas       stop vcuda local, then: vcuda quota set --data-dir ${settings.dataDir} ...`);
  }
  if (settings.kubernetesVersion === '1.36') {
    out('  DRA          kubectl get resourceslices; a claim asks a share of a card as');
    out('               {deviceClassName: gpu.vcuda.io, capacity: {requests: {cores: "30", memory: 8Gi}}}');
    out(`               a pod asking ${settings.domain.core} / ${settings.domain.memory} is given such a claim;`);
    out('               the ledger charges each allocation against the quotas');
  }
  if (!hasWorkloadBinary) out('  note: native fake driver not built; containers idle instead of running cuda-workload');
}

/** Replays the workload and prints the summary every few seconds; returns what stops both. */
async function runWorkloadAndSummary(lc: LocalCluster, spec: WorkloadSpec | undefined, settings: Settings) {
  const trace = spec ? expandWorkload(spec, settings.domain) : [];
  for (const ns of new Set(trace.map((e) => e.pod.metadata.namespace)))
    await lc.client.create('/api/v1/namespaces', { metadata: { name: ns } }).catch(() => undefined);
  // The classes the trace's pods name, so the simulated admission resolves them as what-if does.
  for (const pc of spec?.priorityClasses ?? []) {
    const { name, ...fields } = pc;
    await lc.client
      .create('/apis/scheduling.k8s.io/v1/priorityclasses', {
        apiVersion: 'scheduling.k8s.io/v1',
        kind: 'PriorityClass',
        metadata: { name },
        ...fields,
      })
      .catch(() => undefined);
  }
  const generator = startWorkloadGenerator(lc.client, trace, {
    timeScale: settings.timeScale,
    onRefusal: (pod, message) => out(`  refused ${pod}: ${message.split('\n').join(' ')}`),
  });
  const capacity = expandNodes(lc.cluster).reduce(
    (acc, n) => ({
      core: acc.core + 100 * n.cards.length,
      memoryMiB: acc.memoryMiB + n.cards.reduce((m, c) => m + c.memoryMiB, 0),
    }),
    { core: 0, memoryMiB: 0 },
  );
  const timer = setInterval(() => {
    const heartbeat = { limitSeconds: DEFAULT_HEARTBEAT_LIMIT_SECONDS, nowMs: Date.now() };
    readSummary(lc.client, capacity, heartbeat).then(
      (s) => out(`[${new Date().toISOString().slice(11, 19)}] ${formatSummary(s, generator.stats().refused)}`),
      () => undefined,
    );
  }, settings.summaryMs);
  return () => {
    clearInterval(timer);
    generator.stop();
  };
}

/** Ctrl-C (SIGINT) or SIGTERM: everything stops once, and the process exits. */
function stopOnSignal(lc: LocalCluster, stopWorkload: () => void): void {
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    out('\nvcuda local: stopping...');
    stopWorkload();
    await lc.close();
    out('vcuda local: stopped');
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

export async function runLocal(flags: LocalFlags): Promise<void> {
  const settings = readSettings(flags);
  // The control plane runs in this process: its dashboard streams and webhooks share one heap.
  tuneHeapForLongLivedConnections();
  const hasWorkloadBinary = buildWorkloadProgram();
  const { cluster, spec } = await prepareClusterAndWorkload(flags, settings, hasWorkloadBinary);
  const started = Date.now();
  out(
    `vcuda local: starting ${expandNodes(cluster).length} simulated node(s), ${settings.replicas} control-plane replica(s)...`,
  );
  const lc = await startCluster(flags, settings, cluster);
  // As `kubectl apply -f deploy/overlays/dra/device-class.yaml` on a cluster: what claims name.
  if (settings.kubernetesVersion === '1.36') await installDeviceClass(lc.client);
  out(`vcuda local: ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  printWhereEverythingIs(lc, flags, settings, hasWorkloadBinary);
  stopOnSignal(lc, await runWorkloadAndSummary(lc, spec, settings));
}
