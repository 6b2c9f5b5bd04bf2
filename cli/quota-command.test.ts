import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { closeDb, connectDb } from '../db/connect.js';
import { createLedger } from '../db/ledger.js';
import { parseMember, registerQuotaCommands } from './quota-command.js';

async function run(args: string[]): Promise<string> {
  const out: string[] = [];
  const program = new Command('vcuda').exitOverride();
  registerQuotaCommands(program, { out: (t) => out.push(t) });
  await program.parseAsync(['node', 'vcuda', ...args]);
  return out.join('');
}

describe('vcuda quota / team', () => {
  it('sets a namespace quota the ledger then enforces, lists and deletes it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'vcuda-quota-'));
    const db = ['--data-dir', dataDir];
    expect(
      await run([
        'quota',
        'set',
        'a-small',
        '--cluster',
        'c1',
        '--namespace',
        'team-a',
        '--core',
        '40',
        '--memory-mib',
        '4096',
        ...db,
      ]),
    ).toBe('quota a-small set\n');
    const handle = await connectDb({ dataDir });
    try {
      const ledger = createLedger(handle, { clock: () => new Date() });
      await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-1', index: 0, model: 'H100', memoryMiB: 81559 }]);
      const reserve = (podUid: string, core: number) =>
        ledger.reserve({
          cluster: 'c1',
          podUid,
          namespace: 'team-a',
          pod: podUid,
          node: 'n1',
          items: [{ container: 'c', cardUuid: 'GPU-1', core, memoryMiB: 1024 }],
        });
      await reserve('p1', 30);
      await expect(reserve('p2', 20)).rejects.toMatchObject({ code: 'quota-exceeded' });
    } finally {
      await closeDb(handle);
    }
    expect(await run(['quota', 'list', ...db])).toBe('a-small  c1/team-a  core 30/40  memory 1024/4096 MiB\n');
    expect(await run(['quota', 'delete', 'a-small', ...db])).toBe('quota a-small deleted\n');
    expect(await run(['quota', 'list', ...db])).toBe('');
  });

  it('refuses a quota that names both a team and a namespace, and bad numbers', async () => {
    const db = ['--data-dir', mkdtempSync(join(tmpdir(), 'vcuda-quota-'))];
    await expect(
      run([
        'quota',
        'set',
        'q',
        '--team',
        't',
        '--cluster',
        'c',
        '--namespace',
        'n',
        '--core',
        '1',
        '--memory-mib',
        '1',
        ...db,
      ]),
    ).rejects.toThrow(/a team quota names a team, no cluster or namespace/);
    await expect(
      run(['quota', 'set', 'q', '--cluster', 'c', '--namespace', 'n', '--core', '1.5', '--memory-mib', '1', ...db]),
    ).rejects.toThrow(/--core: "1.5" is not a whole number/);
  });

  it('parses team members as CLUSTER/NAMESPACE', () => {
    expect(parseMember('prod-eu/team-a')).toEqual({ cluster: 'prod-eu', namespace: 'team-a' });
    expect(() => parseMember('team-a')).toThrow(/expected CLUSTER\/NAMESPACE/);
    expect(() => parseMember('prod-eu/Team_A')).toThrow(
      /member "prod-eu\/Team_A": "Team_A" must be a Kubernetes name \(RFC 1123 label\)/,
    );
  });

  describe('refuses what the ledger cannot hold, naming the flag, before touching the database', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'vcuda-quota-'));
    const set = (over: Record<string, string>) => {
      const flags = { '--cluster': 'c1', '--namespace': 'team-a', '--core': '100', '--memory-mib': '1024', ...over };
      return run(['quota', 'set', 'q', ...Object.entries(flags).flat(), '--data-dir', dataDir]);
    };
    it.each([
      [{ '--core': '3000000000' }, /^--core: 3000000000 is more than the ledger holds \(at most 2147483647\)$/],
      [{ '--memory-mib': '99999999999999999999' }, /^--memory-mib: 99999999999999999999 is more than the ledger holds/],
      [{ '--namespace': 'Team_A' }, /^--namespace: "Team_A" must be a Kubernetes name \(RFC 1123 label\)/],
      [{ '--namespace': 'a'.repeat(64) }, /^--namespace: "a{64}" must be a Kubernetes name/],
      [{ '--namespace': 'team-a;drop table quotas' }, /^--namespace: .* must be a Kubernetes name/],
    ])('%o', async (over, message) => {
      await expect(set(over)).rejects.toThrow(message);
    });

    it('takes the largest value the ledger holds', async () => {
      expect(await set({ '--core': '2147483647', '--memory-mib': '2147483647' })).toBe('quota q set\n');
    });

    it('refuses a team member that is not a namespace name', async () => {
      await expect(run(['team', 'set', 't', 'c1/ok', 'c1/NOT OK', '--data-dir', dataDir])).rejects.toThrow(
        /member "c1\/NOT OK": expected CLUSTER\/NAMESPACE/,
      );
      await expect(run(['team', 'set', 't', 'c1/-bad-', '--data-dir', dataDir])).rejects.toThrow(
        /member "c1\/-bad-": "-bad-" must be a Kubernetes name/,
      );
    });
  });
});
