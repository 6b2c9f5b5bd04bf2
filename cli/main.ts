/**
 * `vcuda` command dispatcher. Each component contributes its own commands; this file only
 * lists them, so `vcuda --help` shows exactly the commands that exist.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { registerComputeCommand } from '../node-agent/compute/compute-command.js';
import { registerWebhookCommand } from '../webhooks/webhook-command.js';
import { registerConfigCommand } from './config-command.js';
import { registerControlPlaneCommand } from './control-plane-command.js';
import { registerDbCommand } from './db-command.js';
import { registerDoctorCommand } from './doctor-command.js';
import { registerLocalCommand } from './local-command.js';
import { registerNodeAgentCommand } from './node-agent-command.js';
import { registerQuotaCommands } from './quota-command.js';
import { registerReportCommand } from './report-command.js';
import { registerWhatifCommand } from './whatif-command.js';

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const program = new Command('vcuda')
  .description('Safe fractional NVIDIA GPU sharing for Kubernetes')
  .version(version, '-V, --version', 'print the version')
  .showHelpAfterError()
  .exitOverride((err) => {
    process.exit(err.exitCode);
  });

registerConfigCommand(program);
registerDbCommand(program);
registerQuotaCommands(program);
registerReportCommand(program);
registerComputeCommand(program);
registerNodeAgentCommand(program);
registerWhatifCommand(program);
registerLocalCommand(program);
registerControlPlaneCommand(program);
registerWebhookCommand(program);
registerDoctorCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // Expected failures (bad input, corrupt files, refused operations) are one clear line, not a stack.
  const message = describeFailure(err);
  process.stderr.write(`vcuda: ${message}\n`);
  if (process.env['VCUDA_DEBUG'] && err instanceof Error) process.stderr.write(`${err.stack}\n`);
  process.exitCode = 1;
}

/** One line a person can act on; file-system errors name the path and what is wrong with it. */
function describeFailure(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const { code, path } = err as NodeJS.ErrnoException;
  const problems: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EISDIR: 'is a directory, not a file',
    ENOTDIR: 'a part of the path is not a directory',
  };
  if (code && path && problems[code]) return `${path}: ${problems[code]}`;
  return err.message;
}
