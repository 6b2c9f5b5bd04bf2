import { Command } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { registerControlPlaneCommand } from './control-plane-command.js';

describe('vcuda control-plane --print-config', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });

  it('prints the resolved configuration without the database password', async () => {
    vi.stubEnv('DATABASE_URL', 'postgres://vcuda:hunter2@ledger.db:5432/vcuda?password=hunter2');
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    const program = new Command('vcuda').exitOverride();
    registerControlPlaneCommand(program);
    await program.parseAsync(['node', 'vcuda', 'control-plane', '--print-config', '--cluster-name', 'prod-eu']);
    const printed = JSON.parse(out.join('')) as { clusterName: string; database: { url: string } };
    expect(printed.clusterName).toBe('prod-eu');
    expect(printed.database.url).toBe('postgres://vcuda:****@ledger.db:5432/vcuda?password=****');
    expect(out.join('')).not.toContain('hunter2');
  });
});
