/** `vcuda control-plane`: runs the control plane (webhooks, scheduler extender, ledger API, dashboard, metrics). */
import { type Command, InvalidArgumentError } from 'commander';
import type { ControlPlaneFlags } from '../control-plane/main.js';

const int = (v: string) => {
  const n = Number(v);
  // Commander names the option and its argument around this message.
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`"${v}" is not an integer`);
  return n;
};

export function registerControlPlaneCommand(program: Command): void {
  program
    .command('control-plane')
    .description('run the control plane: admission webhooks, scheduler extender, ledger API, dashboard, /metrics')
    .option('--config <file>', 'config file (YAML or JSON); env VCUDA_CONFIG')
    .option('--port <n>', 'HTTP port (API, dashboard, metrics, health); env VCUDA_PORT', int)
    .option('--https-port <n>', 'HTTPS port for the webhooks, 0 = off; env VCUDA_HTTPS_PORT', int)
    .option('--host <addr>', 'listen address; env VCUDA_HOST')
    .option('--namespace <ns>', "the control plane's namespace; env VCUDA_NAMESPACE")
    .option('--cluster-name <name>', 'cluster name in the ledger; env VCUDA_CLUSTER_NAME')
    .option('--resource-domain <domain>', 'resource domain (nvidia.com); env VCUDA_RESOURCE_DOMAIN')
    .option('--memory-unit-mib <n>', 'MiB per vcuda-memory unit; env VCUDA_MEMORY_UNIT_MIB', int)
    .option('--database-url <url>', 'PostgreSQL url; env DATABASE_URL (absent: embedded PGlite)')
    .option('--data-dir <dir>', 'PGlite data directory; env VCUDA_DATA_DIR (absent: in memory)')
    .option('--kube-mode <mode>', 'in-cluster | kubeconfig | none; env VCUDA_KUBE_MODE')
    .option('--kubeconfig <file>', 'kubeconfig file; env KUBECONFIG')
    .option('--placement <policy>', 'default placement binpack | spread; env VCUDA_PLACEMENT')
    .option('--signing-key-source <src>', 'secret | file | ephemeral; env VCUDA_SIGNING_KEY_SOURCE')
    .option('--signing-key-file <file>', 'signing keys JSON for source file; env VCUDA_SIGNING_KEY_FILE')
    .option('--webhook-registration <mode>', 'auto | off; env VCUDA_WEBHOOK_REGISTRATION')
    .option(
      '--webhook-url <url>',
      'https://host:port the API server calls when the control plane runs outside the cluster; env VCUDA_WEBHOOK_URL',
    )
    .option(
      '--webhook-scheduler-name <name>',
      'scheduler the webhook sets on vcuda pods (vcuda-scheduler); env VCUDA_WEBHOOK_SCHEDULER_NAME',
    )
    .option(
      '--webhook-privileged-username <user...>',
      "users who may write vcuda.io/ annotations (default: vcuda's two service accounts; add the identity the control plane runs as when it is another); env VCUDA_WEBHOOK_PRIVILEGED_USERNAMES (comma-separated)",
    )
    .option('--log-level <level>', 'info, debug, ...; env VCUDA_LOG_LEVEL')
    .option('--print-config', 'print the resolved configuration (passwords redacted) and exit')
    .action(async (opts: ControlPlaneFlags & { printConfig?: boolean }) => {
      // Loaded here: the control plane's dependencies cost every other command ~2 s of start-up.
      const { buildConfig, runControlPlane } = await import('../control-plane/main.js');
      if (opts.printConfig) {
        const { redactConfig } = await import('../contract/redact.js');
        process.stdout.write(`${JSON.stringify(redactConfig(buildConfig(opts, process.env)), null, 2)}\n`);
        return;
      }
      await runControlPlane(opts);
    });
}
