/**
 * `npm start` as a newcomer runs it: `vcuda local` with the default cluster and demo workload
 * places pods on cards within 30 s of being ready, the dashboard answers, Ctrl-C stops it cleanly.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KubeClient } from '../../sim/kube-client.js';
import { descendantsOf, processAlive } from '../support/process.js';
import { runVcuda } from './e2e-helpers.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('vcuda local', () => {
  it('places demo pods on cards within 30 s, serves the dashboard, and stops on SIGINT', async () => {
    const { child, output, exited } = runVcuda(['local', '--port', '0', '--summary-every', '2']);
    try {
      await expect.poll(() => /ready in/.test(output()), { timeout: 90_000, interval: 250 }).toBe(true);
      const readyAt = Date.now();
      const dashboard = /dashboard\s+(http:\/\/\S+)/.exec(output())![1]!;
      expect((await fetch(dashboard)).status).toBe(200);
      expect(await (await fetch(dashboard.replace(/\/$/, '/healthz'))).text()).toBe('ok');
      await expect
        .poll(() => [...output().matchAll(/\((\d+) on vcuda cards\)/g)].some((m) => Number(m[1]) > 0), {
          timeout: 30_000,
          interval: 250,
        })
        .toBe(true);
      expect(Date.now() - readyAt).toBeLessThan(30_000);
      // The demo's invalid pods arrive a few seconds in; admission refuses them with the webhook's words.
      await expect
        .poll(() => /refused team-[ab]\/\S+: admission webhook "[^"]+" denied the request/.test(output()), {
          timeout: 20_000,
        })
        .toBe(true);
      expect(output()).toMatch(/kubeconfig\s+\/\S+kubeconfig/);
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    expect(output()).toContain('vcuda local: stopped');
  }, 150_000);
});

describe('vcuda local as a 1.32 cluster with its nodes in processes of their own', () => {
  it('claims 1.32, runs a process per node, and leaves none behind on SIGINT', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-local-132-'));
    writeFileSync(join(dir, 'cluster.yaml'), 'nodes:\n  - { count: 2, cards: 2 }\n');
    const args = ['local', '--port', '0', '--workload', 'none', '--cluster', join(dir, 'cluster.yaml')];
    const { child, output, exited } = runVcuda([...args, '--kubernetes-version', '1.32', '--node-processes']);
    let nodes: number[] = [];
    try {
      await expect.poll(() => /ready in/.test(output()), { timeout: 90_000, interval: 250 }).toBe(true);
      const kubeconfig = parse(readFileSync(/kubeconfig\s+(\/\S+kubeconfig)/.exec(output())![1]!, 'utf8'));
      const server: string = kubeconfig.clusters[0].cluster.server;
      const caPem = Buffer.from(kubeconfig.clusters[0].cluster['certificate-authority-data'], 'base64').toString();
      const admin = new KubeClient(server, { token: kubeconfig.users[0].user.token, caPem });
      expect(await admin.get('/version')).toMatchObject({ major: '1', minor: '32' });
      // The nodes in their own processes reached the API server with their own credentials.
      await expect.poll(async () => (await admin.list('/api/v1/nodes')).items.length, { timeout: 30_000 }).toBe(2);
      // The control plane's Secrets (its signing key among them) are the kubeconfig holder's only.
      const secrets = '/api/v1/namespaces/vcuda-system/secrets';
      expect((await admin.list(secrets)).items.length).toBeGreaterThan(0);
      expect((await new KubeClient(server, { caPem }).getText(secrets)).status).toBe(401);
      nodes = descendantsOf(child.pid!).filter((pid) => commandLineOf(pid).includes('node-process-main'));
      expect(nodes.length).toBe(2);
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    expect(nodes.filter(processAlive)).toEqual([]);
  }, 150_000);

  it('refuses a version it cannot be, naming the flag', async () => {
    const child = spawn(process.execPath, [join(root, 'bin', 'vcuda.js'), 'local', '--kubernetes-version', '1.29'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).not.toBe(0);
    expect(err).toContain('--kubernetes-version must be 1.26 or 1.32 or 1.36, not "1.29"');
  }, 60_000);
});

function commandLineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

describe('npm start', () => {
  it('runs another resource domain from the environment, and SIGTERM to npm leaves no process behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-npm-start-'));
    writeFileSync(join(dir, 'cluster.yaml'), 'nodes:\n  - { count: 1, cards: 2 }\n');
    // 4 units of 256 MiB: a gpu-manager style request, unchanged.
    writeFileSync(
      join(dir, 'workload.yaml'),
      'pods:\n  - { name: sleeper, namespace: team-x, core: 30, memory: 4, command: [sleep, "300"] }\n',
    );
    const npm = spawn(
      'npm',
      [
        'start',
        '--',
        '--data-dir',
        join(dir, 'ledger'),
        '--port',
        '0',
        '--summary-every',
        '1',
        '--cluster',
        join(dir, 'cluster.yaml'),
        '--workload',
        join(dir, 'workload.yaml'),
      ],
      {
        cwd: root,
        env: { ...process.env, VCUDA_RESOURCE_DOMAIN: 'tencent.com', VCUDA_MEMORY_UNIT_MIB: '256' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    npm.stdout.on('data', (c: Buffer) => (out += c.toString()));
    npm.stderr.on('data', () => {});
    const exited = new Promise<void>((resolve) => npm.on('exit', () => resolve()));
    let processes: number[] = [];
    try {
      await expect.poll(() => /ready in/.test(out), { timeout: 90_000, interval: 250 }).toBe(true);
      await expect
        .poll(() => [...out.matchAll(/\((\d+) on vcuda cards\)/g)].some((m) => Number(m[1]) === 1), {
          timeout: 30_000,
          interval: 250,
        })
        .toBe(true);
      processes = descendantsOf(npm.pid!);
      // npm, the shell's exec'd node and the pod's container at least.
      expect(processes.length).toBeGreaterThanOrEqual(2);
    } finally {
      npm.kill('SIGTERM');
    }
    await exited;
    await expect.poll(() => processes.filter(processAlive), { timeout: 15_000, interval: 200 }).toEqual([]);
  }, 150_000);
});
