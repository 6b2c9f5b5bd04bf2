/** Which command modules `vcuda ARGS` loads: only what the command needs, everything for help. */
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { COMMAND_NAMES, modulesFor, registerCommands } from './commands.js';

describe('command loading', () => {
  it('loads nothing for the version, one module for a command, all for help or a typo', () => {
    expect(modulesFor(['--version'])).toEqual([]);
    expect(modulesFor(['-V'])).toEqual([]);
    expect(modulesFor(['quota', 'list'])).toHaveLength(1);
    expect(modulesFor(['team', 'set'])).toEqual(modulesFor(['quota']));
    const all = modulesFor([]);
    expect(modulesFor(['--help'])).toEqual(all);
    expect(modulesFor(['help', 'doctor'])).toEqual(all);
    expect(modulesFor(['qouta'])).toEqual(all);
    expect(new Set(all).size).toBe(all.length);
  });

  it('registers, for each listed name, a command of that name, and nothing it does not list', async () => {
    const program = new Command('vcuda');
    await registerCommands(program, []);
    expect(program.commands.map((c) => c.name()).sort()).toEqual([...COMMAND_NAMES].sort());
  });

  it('registers the asked-for command alone', async () => {
    const program = new Command('vcuda');
    await registerCommands(program, ['doctor', '--json']);
    expect(program.commands.map((c) => c.name())).toEqual(['doctor']);
  });
});
