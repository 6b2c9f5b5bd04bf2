/**
 * `vcuda` command dispatcher. Each component contributes its own commands; commands.ts lists
 * them and loads only the one asked for, so `vcuda --help` shows exactly the commands that exist
 * and `vcuda --version` answers without loading any.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { registerCommands } from './commands.js';

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

try {
  await registerCommands(program, process.argv.slice(2));
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
