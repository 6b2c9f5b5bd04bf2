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
import { podPath } from '../../sim/kube-client.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { gpuPod } from './e2e-helpers.js';

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
      schedulerBackoffMs: { initial: 100, max: 1000 },
    });
    // The extender's own TLS port, where the cluster has one: its plain port is no extender.
    const extenderUrl = lc.extenderUrl;
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

  it("lists a vcuda pod that cannot be placed, with the scheduler's reason", async () => {
    await lc.client.create('/api/v1/namespaces', { metadata: { name: 'doctor' } });
    await lc.client.create(podPath('doctor'), gpuPod('too-big', 200));
    const warned = async () =>
      (await lc.client.list('/api/v1/namespaces/doctor/events')).items.some((e) => e['reason'] === 'FailedScheduling');
    for (let i = 0; i < 100 && !(await warned()); i++) await new Promise((r) => setTimeout(r, 100));
    const { findings, failed } = await runDoctor(flags);
    expect(failed).toBe(false);
    expect(problems(findings)).toEqual([
      expect.objectContaining({
        check: 'pending pods',
        verdict: 'warn',
        summary: expect.stringMatching(
          /^doctor\/too-big Pending for \d+ s \(scheduler \S+\): FailedScheduling: 0\/1 nodes/,
        ),
        fix: 'kubectl -n doctor describe pod too-big',
      }),
    ]);
    await lc.client.delete(podPath('doctor', 'too-big'), 0);
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
