/**
 * `vcuda local` (= `npm start`): a simulated cluster with fake GPUs running the real control
 * plane, scheduler extender, webhook, ledger and node agents, plus a workload generator. Prints
 * the dashboard URL, a kubeconfig for kubectl, and a running summary; Ctrl-C stops everything.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { resourceNames } from '../contract/index.js';

/** Not 8080: that is kubectl's fallback API server, so kubectl without a kubeconfig would reach vcuda. */
export const DEFAULT_LOCAL_PORT = 7080;

type LocalFlags = {
  port: string;
  resourceDomain: string;
  memoryUnitMib?: string;
  cluster?: string;
  workload?: string;
  replicas: string;
  database?: string;
  timeScale: string;
  logLevel: string;
  summaryEvery: string;
  kubernetesVersion: string;
  nodeProcesses?: boolean;
};

const SERVED_VERSIONS = ['1.26', '1.32'] as const;

export function registerLocalCommand(program: Command): void {
  program
    .command('local')
    .description('run vcuda on a simulated cluster with fake GPUs (no cluster, no GPU needed)')
    .option(
      '--port <port>',
      'HTTP port of the dashboard and API; env PORT or VCUDA_PORT',
      process.env['VCUDA_PORT'] || process.env['PORT'] || String(DEFAULT_LOCAL_PORT),
    )
    .option(
      '--resource-domain <domain>',
      'resource domain of every component (tencent.com for gpu-manager); env VCUDA_RESOURCE_DOMAIN',
      process.env['VCUDA_RESOURCE_DOMAIN'] || 'nvidia.com',
    )
    .option(
      '--memory-unit-mib <n>',
      "MiB per vcuda-memory unit (256 for gpu-manager); env VCUDA_MEMORY_UNIT_MIB; default: the cluster file's",
      process.env['VCUDA_MEMORY_UNIT_MIB'] || undefined,
    )
    .option('--cluster <file>', 'cluster description (YAML); default: 4 nodes x 8 fake 80 GiB cards')
    .option('--workload <file>', "workload trace (YAML), or 'none'; default: a demo mix")
    .option('--replicas <n>', 'control-plane replicas', '1')
    .option('--database <url>', 'postgres://... for the ledger; default: embedded PGlite in memory')
    .option('--time-scale <x>', 'stretch (>1) or squeeze (<1) the workload timeline', '1')
    .option('--log-level <level>', 'silent, error, warn, info, debug', 'warn')
    .option('--summary-every <seconds>', 'print the summary this often', '5')
    .option(
      '--kubernetes-version <version>',
      'the version the simulated API server claims: 1.26 (webhooks scoped by selectors) or 1.32 (by matchConditions, evaluated as CEL)',
      '1.26',
    )
    .option('--node-processes', 'run each node (kubelet + node agent) in a process of its own, as on a real cluster')
    .action(async (flags: LocalFlags) => {
      // Imported here so other commands do not load the whole simulator.
      const { startLocalCluster, WORKLOAD_DIR } = await import('../sim/local-cluster.js');
      const { DEFAULT_CLUSTER, loadClusterSpec, expandNodes } = await import('../sim/cluster-spec.js');
      const { demoWorkload, DEMO_QUOTAS } = await import('../sim/workload/demo-workload.js');
      const { expandWorkload, loadWorkloadSpec } = await import('../sim/workload/workload-spec.js');
      const { startWorkloadGenerator } = await import('../sim/workload/workload-generator.js');
      const { formatSummary, readSummary } = await import('../sim/local-summary.js');
      const { localDoctorCommand } = await import('./doctor-command.js');
      const out = (line: string) => process.stdout.write(`${line}\n`);
      const port = Number(flags.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new Error(`--port must be 0..65535, not "${flags.port}"`);
      const replicas = Number(flags.replicas);
      if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5)
        throw new Error(`--replicas must be 1..5, not "${flags.replicas}"`);
      const timeScale = Number(flags.timeScale);
      if (!(timeScale > 0)) throw new Error(`--time-scale must be a positive number, not "${flags.timeScale}"`);
      const kubernetesVersion = SERVED_VERSIONS.find((v) => v === flags.kubernetesVersion);
      if (!kubernetesVersion)
        throw new Error(
          `--kubernetes-version must be ${SERVED_VERSIONS.join(' or ')}, not "${flags.kubernetesVersion}"`,
        );
      const names = resourceNames(flags.resourceDomain);
      const unit = flags.memoryUnitMib === undefined ? undefined : Number(flags.memoryUnitMib);
      if (unit !== undefined && !(Number.isInteger(unit) && unit >= 1 && unit <= 65536))
        throw new Error(
          `--memory-unit-mib must be a whole number of MiB from 1 to 65536, not "${flags.memoryUnitMib}"`,
        );
      const fromFile = flags.cluster ? await loadClusterSpec(flags.cluster) : DEFAULT_CLUSTER;
      const base = unit === undefined ? fromFile : { ...fromFile, memoryUnitMiB: unit };
      const useDemo = !flags.workload;
      const cluster = useDemo ? { ...base, quotas: { ...DEMO_QUOTAS, ...base.quotas } } : base;
      // The CUDA test program for simulated pods; without a C compiler or the fake driver, pods idle.
      try {
        execFileSync('make', ['-s', '-C', join(WORKLOAD_DIR, '..', '..')], { stdio: 'ignore' });
      } catch {
        // reported below when the program is missing
      }
      const hasWorkloadBinary = existsSync(`${WORKLOAD_DIR}/cuda-workload`);
      const spec = useDemo
        ? demoWorkload(
            (_limitMiB, allocMiB, busyPercent) =>
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
                : undefined,
            cluster.memoryUnitMiB,
          )
        : flags.workload === 'none'
          ? undefined
          : await loadWorkloadSpec(flags.workload!);
      const started = Date.now();
      out(
        `vcuda local: starting ${expandNodes(cluster).length} simulated node(s), ${replicas} control-plane replica(s)...`,
      );
      const lc = await startLocalCluster({
        cluster,
        port,
        resourceDomain: names.domain,
        replicas,
        ...(flags.database ? { databaseUrl: flags.database } : {}),
        logLevel: flags.logLevel as 'warn',
        schedulerBackoffMs: { initial: 500, max: 5000 },
        kubernetesVersion,
        nodeProcesses: flags.nodeProcesses === true,
      }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EADDRINUSE') throw err;
        throw new Error(`port ${port} is in use; pick another with --port N (npm start -- --port N) or PORT=N`);
      });
      const capacity = expandNodes(cluster).reduce(
        (acc, n) => ({
          core: acc.core + 100 * n.cards.length,
          memoryMiB: acc.memoryMiB + n.cards.reduce((m, c) => m + c.memoryMiB, 0),
        }),
        { core: 0, memoryMiB: 0 },
      );
      out(`vcuda local: ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      out(`  dashboard    ${lc.url}/`);
      out(`  API          ${lc.url}/api/v1/...   metrics ${lc.url}/metrics   health ${lc.url}/healthz`);
      out(`  reports      vcuda report quota-usage --url ${lc.url}`);
      out(`  kubeconfig   ${lc.kubeconfigPath}`);
      out(`               export KUBECONFIG=${lc.kubeconfigPath}; kubectl get pods -A -o wide`);
      out(`  doctor       ${localDoctorCommand(lc, flags.database)}`);
      if (!hasWorkloadBinary)
        out('  note: native fake driver not built; containers idle instead of running cuda-workload');
      const namespaces = new Set<string>();
      const trace = spec ? expandWorkload(spec, names) : [];
      for (const e of trace) namespaces.add(e.pod.metadata.namespace);
      for (const ns of namespaces)
        await lc.client.create('/api/v1/namespaces', { metadata: { name: ns } }).catch(() => undefined);
      const generator = startWorkloadGenerator(lc.client, trace, {
        timeScale,
        onRefusal: (pod, message) => out(`  refused ${pod}: ${message.split('\n').join(' ')}`),
      });
      const summaryMs = Math.max(1, Number(flags.summaryEvery)) * 1000;
      const timer = setInterval(() => {
        readSummary(lc.client, capacity).then(
          (s) => out(`[${new Date().toISOString().slice(11, 19)}] ${formatSummary(s, generator.stats().refused)}`),
          () => undefined,
        );
      }, summaryMs);
      let stopping = false;
      const stop = async () => {
        if (stopping) return;
        stopping = true;
        out('\nvcuda local: stopping...');
        clearInterval(timer);
        generator.stop();
        await lc.close();
        out('vcuda local: stopped');
        process.exit(0);
      };
      process.once('SIGINT', () => void stop());
      process.once('SIGTERM', () => void stop());
    });
}
