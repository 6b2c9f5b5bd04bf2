/** `vcuda node-agent`: runs the node agent (the DaemonSet's entry point). */
import type { Command } from 'commander';
import { messageOf } from '../contract/index.js';

export function registerNodeAgentCommand(program: Command): void {
  program
    .command('node-agent')
    .description('run the node agent: device plugins, NVML inventory and health, allocation, metrics')
    .option('--config <file>', 'YAML/JSON config file (env NODE_NAME, VCUDA_* and flags override it)')
    .option('--node-name <name>', 'this node (default: env NODE_NAME)')
    .option('--resource-domain <domain>', 'resource domain, e.g. nvidia.com or tencent.com')
    .option('--memory-unit-mib <n>', 'size of one vcuda-memory unit in MiB', (v) => Number(v))
    .option('--port <n>', 'HTTP port for /healthz and /metrics', (v) => Number(v))
    .action(
      async (opts: {
        config?: string;
        nodeName?: string;
        resourceDomain?: string;
        memoryUnitMib?: number;
        port?: number;
      }) => {
        // Imported here so other commands do not load NVML or gRPC.
        const { runNodeAgent } = await import('../node-agent/main.js');
        const flags: Record<string, unknown> = {};
        if (opts.nodeName) flags['nodeName'] = opts.nodeName;
        if (opts.resourceDomain) flags['resourceDomain'] = opts.resourceDomain;
        if (opts.memoryUnitMib !== undefined) flags['memoryUnitMiB'] = opts.memoryUnitMib;
        if (opts.port !== undefined) flags['http'] = { port: opts.port };
        // A DaemonSet pod that cannot start must exit non-zero, so the kubelet restarts it and it shows.
        const agent = await runNodeAgent({
          ...(opts.config ? { configFile: opts.config } : {}),
          flags,
          env: process.env,
        }).catch((err: unknown) => {
          process.stderr.write(`vcuda node-agent: cannot start: ${messageOf(err)}\n`);
          process.exit(1);
        });
        const shutdown = () => {
          agent.stop().then(
            () => process.exit(0),
            () => process.exit(1),
          );
        };
        process.once('SIGTERM', shutdown);
        process.once('SIGINT', shutdown);
      },
    );
}
