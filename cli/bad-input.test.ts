/**
 * What a person sees when they get a command wrong: one line that names the file, flag or field
 * and what to do, never a stack trace or a library's internal advice.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'vcuda-bad-input-'));
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};
const vcuda = (...args: string[]) => {
  const run = spawnSync(process.execPath, [join(root, 'bin', 'vcuda.js'), ...args], { cwd: root, encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
};

describe('vcuda: bad input', () => {
  it('prints its version', () => {
    const { status, stdout } = vcuda('--version');
    expect(status).toBe(0);
    expect(stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it.each([
    [
      'a missing file',
      ['whatif', '--workload', join(dir, 'nope.yaml')],
      `vcuda: ${join(dir, 'nope.yaml')}: no such file or directory\n`,
    ],
    [
      'a multi-document YAML file',
      ['whatif', '--workload', file('two.yaml', 'pods: []\n---\npods: []\n')],
      `vcuda: ${join(dir, 'two.yaml')}: holds 2 YAML documents (separated by ---); give one per file\n`,
    ],
    [
      'a YAML syntax error',
      ['whatif', '--workload', file('broken.yaml', 'pods: [\n')],
      new RegExp(`^vcuda: ${join(dir, 'broken.yaml')}: not valid YAML: .* at line \\d+, column \\d+\\n$`),
    ],
    [
      'whatif without a workload',
      ['whatif'],
      'vcuda: --workload: <file> is required (a workload trace; see sim/examples/workload.yaml)\n',
    ],
    [
      'a limit file without the card UUID',
      ['config', 'write', '--out', join(dir, 'c.conf'), '--region', '/r', '--device', '0:memory=1GiB,core=30'],
      "vcuda: --device 0:memory=1GiB,core=30: uuid=GPU-… is required (the card's UUID, as nvidia-smi -L prints it)\n",
    ],
    [
      'a core above one card',
      [
        'config',
        'write',
        '--out',
        join(dir, 'c.conf'),
        '--region',
        '/r',
        '--device',
        '0:memory=1GiB,core=150,uuid=GPU-a',
      ],
      'vcuda: --device 0:memory=1GiB,core=150,uuid=GPU-a: core must be a whole percent of the card, 1..100, not "150"\n',
    ],
    [
      'a Service given to the pod checker',
      ['webhook', 'check', file('svc.yaml', 'apiVersion: v1\nkind: Service\nmetadata: {name: s}\n')],
      `vcuda: ${join(dir, 'svc.yaml')}: is a Service; vcuda webhook check takes a Pod or a workload with a pod template\n`,
    ],
  ])('%s', (_name, args, expected) => {
    const { status, stderr } = vcuda(...args);
    expect(status).toBe(1);
    if (typeof expected === 'string') expect(stderr).toBe(expected);
    else expect(stderr).toMatch(expected);
  });

  it('reports a mistyped option as such, with a suggestion', () => {
    const { status, stderr } = vcuda('whatif', '--clusters', 'x.yaml');
    expect(status).not.toBe(0);
    expect(stderr).toContain("unknown option '--clusters'");
    expect(stderr).toContain('Did you mean --cluster?');
  });
});
