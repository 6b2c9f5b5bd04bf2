/**
 * The `vcuda` commands and where each is defined, loaded on demand: `vcuda quota list` imports
 * only the quota module, not the control plane, the node agent or the Kubernetes client, so a
 * command starts in the time its own code needs. `--version` loads none; `--help` and anything
 * unknown load them all (help lists every command; a typo gets commander's suggestion).
 */
import type { Command } from 'commander';

type Register = (program: Command) => void;

/** Each module's register function, in the order `vcuda --help` lists them. */
const MODULES: { names: string[]; load: () => Promise<Register> }[] = [
  { names: ['config'], load: async () => (await import('./config-command.js')).registerConfigCommand },
  { names: ['db'], load: async () => withDefaultIo((await import('./db-command.js')).registerDbCommand) },
  {
    names: ['quota', 'team'],
    load: async () => withDefaultIo((await import('./quota-command.js')).registerQuotaCommands),
  },
  { names: ['report'], load: async () => withDefaultIo((await import('./report-command.js')).registerReportCommand) },
  {
    names: ['compute'],
    load: async () => (await import('../node-agent/compute/compute-command.js')).registerComputeCommand,
  },
  { names: ['node-agent'], load: async () => (await import('./node-agent-command.js')).registerNodeAgentCommand },
  { names: ['whatif'], load: async () => (await import('./whatif-command.js')).registerWhatifCommand },
  { names: ['local'], load: async () => (await import('./local-command.js')).registerLocalCommand },
  {
    names: ['control-plane'],
    load: async () => (await import('./control-plane-command.js')).registerControlPlaneCommand,
  },
  { names: ['webhook'], load: async () => (await import('../webhooks/webhook-command.js')).registerWebhookCommand },
  { names: ['doctor'], load: async () => withDefaultIo((await import('./doctor-command.js')).registerDoctorCommand) },
];

/** A register function whose optional output argument keeps its default (stdout). */
function withDefaultIo(register: (program: Command) => void): Register {
  return (program) => register(program);
}

/** Every command name `vcuda` knows. */
export const COMMAND_NAMES: readonly string[] = MODULES.flatMap((m) => m.names);

/**
 * Which modules to load for these arguments (`process.argv.slice(2)`): none for the version, the
 * one defining the first argument when it names a command, all of them otherwise. Pure.
 */
export function modulesFor(args: readonly string[]): number[] {
  const first = args[0];
  if (first === '-V' || first === '--version') return [];
  const one = MODULES.findIndex((m) => first !== undefined && m.names.includes(first));
  return one >= 0 ? [one] : MODULES.map((_, i) => i);
}

/** Registers on `program` the commands these arguments need. */
export async function registerCommands(program: Command, args: readonly string[]): Promise<void> {
  const registers = await Promise.all(modulesFor(args).map((i) => (MODULES[i] as (typeof MODULES)[number]).load()));
  for (const register of registers) register(program);
}
