/**
 * `vcuda local` (= `npm start`): a simulated cluster with fake GPUs running the real control
 * plane, scheduler extender, webhook, ledger and node agents, plus a workload generator. Prints
 * the dashboard URL, a kubeconfig for kubectl, and a running summary; Ctrl-C stops everything.
 */
import type { Command } from 'commander';
import type { LocalFlags } from './local-run.js';

/** Not 8080: that is kubectl's fallback API server, so kubectl without a kubeconfig would reach vcuda. */
export const DEFAULT_LOCAL_PORT = 7080;

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
    .option('--database <url>', 'postgres://... for the ledger; default: embedded PGlite in --data-dir')
    .option(
      '--data-dir <dir>',
      'where the embedded ledger is kept across restarts; env VCUDA_LOCAL_DATA_DIR; default ~/.vcuda/local-ledger',
    )
    .option('--time-scale <x>', 'stretch (>1) or squeeze (<1) the workload timeline', '1')
    .option('--log-level <level>', 'silent, error, warn, info, debug', 'warn')
    .option('--summary-every <seconds>', 'print the summary this often', '5')
    .option(
      '--kubernetes-version <version>',
      'the version the simulated API server claims: 1.26 (webhooks scoped by selectors), 1.32 (by matchConditions, evaluated as CEL) or 1.36 (also DRA: resource.k8s.io/v1, claims allocated by the scheduler)',
      '1.26',
    )
    .option('--node-processes', 'run each node (kubelet + node agent) in a process of its own, as on a real cluster')
    .option(
      '--dra',
      'a 1.36 cluster with vcuda as a DRA driver (= --kubernetes-version 1.36, with the DeviceClass): node agents publish ResourceSlices, pods get shares through ResourceClaims (pods asking vcuda-core are given claims), the ledger charges claims against quotas (no demo workload unless --workload)',
    )
    .action(async (flags: LocalFlags) => {
      // Imported here so other commands do not load the whole simulator.
      const { runLocal } = await import('./local-run.js');
      await runLocal(flags);
    });
}
