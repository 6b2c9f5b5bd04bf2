/**
 * `vcuda` command dispatcher. Each component contributes its own commands; this file only
 * lists them, so `vcuda --help` shows exactly the commands that exist.
 */
import { Command } from 'commander';
import { registerComputeCommand } from '../node-agent/compute/compute-command.js';
import { registerWebhookCommand } from '../webhooks/webhook-command.js';
import { registerBenchCommand } from './bench-command.js';
import { registerConfigCommand } from './config-command.js';
import { registerControlPlaneCommand } from './control-plane-command.js';
import { registerDbCommand } from './db-command.js';
import { registerLocalCommand } from './local-command.js';
import { registerNodeAgentCommand } from './node-agent-command.js';
import { registerQuotaCommands } from './quota-command.js';
import { registerReportCommand } from './report-command.js';
import { registerWhatifCommand } from './whatif-command.js';

const program = new Command('vcuda')
  .description('Safe fractional NVIDIA GPU sharing for Kubernetes')
  .showHelpAfterError()
  .exitOverride((err) => {
    process.exit(err.exitCode);
  });

registerConfigCommand(program);
registerBenchCommand(program);
registerDbCommand(program);
registerQuotaCommands(program);
registerReportCommand(program);
registerComputeCommand(program);
registerNodeAgentCommand(program);
registerWhatifCommand(program);
registerLocalCommand(program);
registerControlPlaneCommand(program);
registerWebhookCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // Expected failures (bad input, corrupt files, refused operations) are one clear line, not a stack.
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`vcuda: ${message}\n`);
  if (process.env['VCUDA_DEBUG'] && err instanceof Error) process.stderr.write(`${err.stack}\n`);
  process.exitCode = 1;
}
