/**
 * `vcuda doctor` against a running local cluster: a healthy one passes every check; each piece
 * broken the way it breaks in a real cluster (signing keys gone, a node agent dead, every
 * control-plane replica down) is named with its fix, and the command exits 1.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Finding } from '../../cli/doctor/judge.js';
import { type DoctorFlags, runDoctor } from '../../cli/doctor-command.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';

const repoRoot = join(import.meta.dirname, '..', '..');

describe('vcuda doctor on a local cluster', { timeout: 120_000 }, () => {
  let lc: LocalCluster;
  let flags: DoctorFlags;

  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'doctor',
        nodes: [{ namePrefix: 'node', count: 1, cards: 1, memoryMiB: 8192 }],
      }),
      logLevel: (process.env['VCUDA_TEST_LOG_LEVEL'] as 'info' | undefined) ?? 'silent',
    });
    // The extender's own TLS port, where the cluster has one: its plain port is no extender.
    const extenderUrl = (lc as { extenderUrl?: string }).extenderUrl;
    flags = {
      kubeconfig: lc.kubeconfigPath,
      namespace: 'vcuda-system',
      url: lc.url,
      ...(extenderUrl ? { extenderUrl } : {}),
      heartbeatStaleSeconds: '60',
      timeoutSeconds: '5',
    };
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  const problems = (findings: Finding[]) => findings.filter((f) => f.verdict === 'fail' || f.verdict === 'warn');

  it('finds nothing wrong with a healthy cluster', async () => {
    const { findings, failed } = await runDoctor(flags);
    expect(problems(findings)).toEqual([]);
    expect(failed).toBe(false);
    expect(findings.map((f) => f.check)).toEqual(
      expect.arrayContaining(['API server', 'webhooks', 'node agents', 'signing keys', 'control plane']),
    );
  });

  it('names a missing JWKS ConfigMap, with the fix', async () => {
    await lc.client.delete('/api/v1/namespaces/vcuda-system/configmaps/vcuda-jwks');
    const { findings, failed } = await runDoctor(flags);
    expect(failed).toBe(true);
    expect(problems(findings)).toEqual([
      expect.objectContaining({
        check: 'signing keys',
        verdict: 'fail',
        summary: expect.stringContaining('no vcuda-jwks ConfigMap'),
        fix: expect.stringContaining('rollout restart deploy/vcuda-control-plane'),
      }),
    ]);
  });

  it('names a node whose agent stopped heartbeating', async () => {
    await lc.nodes[0]!.stopAgent();
    await new Promise((r) => setTimeout(r, 1200));
    const { findings } = await runDoctor({ ...flags, heartbeatStaleSeconds: '1' });
    expect(findings).toContainEqual(
      expect.objectContaining({
        check: 'node agents',
        verdict: 'fail',
        summary: expect.stringMatching(/^node-0: last heartbeat \d+ s ago \(limit 1 s\)/),
        fix: expect.stringContaining('spec.nodeName=node-0'),
      }),
    );
  });

  it('exits 1 and prints the fix when no control-plane replica answers', async () => {
    await lc.killReplica(0);
    const args = ['bin/vcuda.js', 'doctor', '--kubeconfig', lc.kubeconfigPath, '--url', lc.url];
    const run = await promisify(execFile)(process.execPath, args, { cwd: repoRoot }).then(
      (r) => ({ code: 0, stdout: r.stdout }),
      (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
    );
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^vcuda doctor: \d+ problem\(s\)/);
    expect(run.stdout).toMatch(/fail {2}control plane +\/readyz not reachable: /);
    expect(run.stdout).toContain('fix: kubectl -n vcuda-system get pods -l app.kubernetes.io/name=vcuda-control-plane');
  });
});
