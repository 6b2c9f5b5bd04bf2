import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..');
const vcuda = (...args: string[]) => run(process.execPath, [join(root, 'bin', 'vcuda.js'), ...args], { cwd: root });

describe('vcuda whatif', () => {
  it('plans the example fleet and workload and prints rate, stranded capacity and refusals', async () => {
    const { stdout } = await vcuda(
      'whatif',
      '--cluster',
      'sim/examples/cluster.yaml',
      '--workload',
      'sim/examples/workload.yaml',
      '--json',
    );
    const report = JSON.parse(stdout);
    expect(report).toMatchObject({ pods: 83, invalid: 3, cards: 40 });
    expect(report.placed + report.unplaced + report.quotaRefused + report.invalid).toBe(83);
    expect(report.quotaRefused).toBeGreaterThan(0);
    const text = (
      await vcuda('whatif', '--cluster', 'sim/examples/cluster.yaml', '--workload', 'sim/examples/workload.yaml')
    ).stdout;
    expect(text).toMatch(/placement rate \d+\.\d% of valid, in-quota pods/);
    expect(text).toMatch(/stranded core\s+\d+ hundredths/);
    expect(text).toMatch(/refused by quota\s+\d+/);
  }, 120_000);

  it('names the file, field and rule of a bad workload', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'whatif-'));
    writeFileSync(join(dir, 'w.yaml'), 'pods:\n  - { name: Bad_Name, core: 30 }\n');
    const err = (await vcuda('whatif', '--workload', join(dir, 'w.yaml')).catch((e: { stderr: string }) => e)) as {
      stderr: string;
    };
    expect(err.stderr).toContain('w.yaml');
    expect(err.stderr).toContain('pods[0]');
  }, 120_000);
});
