/**
 * `npm start` as a newcomer runs it: `vcuda local` with the default cluster and demo workload
 * places pods on cards within 30 s of being ready, the dashboard answers, Ctrl-C stops it cleanly.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('vcuda local', () => {
  it('places demo pods on cards within 30 s, serves the dashboard, and stops on SIGINT', async () => {
    const child = spawn(
      process.execPath,
      [join(root, 'bin', 'vcuda.js'), 'local', '--port', '0', '--summary-every', '2'],
      {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', () => {});
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await expect.poll(() => /ready in/.test(out), { timeout: 90_000, interval: 250 }).toBe(true);
      const readyAt = Date.now();
      const dashboard = /dashboard\s+(http:\/\/\S+)/.exec(out)![1]!;
      expect((await fetch(dashboard)).status).toBe(200);
      expect(await (await fetch(dashboard.replace(/\/$/, '/healthz'))).text()).toBe('ok');
      await expect
        .poll(() => [...out.matchAll(/\((\d+) on vcuda cards\)/g)].some((m) => Number(m[1]) > 0), {
          timeout: 30_000,
          interval: 250,
        })
        .toBe(true);
      expect(Date.now() - readyAt).toBeLessThan(30_000);
      // The demo's invalid pods arrive a few seconds in; admission refuses them with the webhook's words.
      await expect
        .poll(() => /refused team-[ab]\/\S+: admission webhook "[^"]+" denied the request/.test(out), {
          timeout: 20_000,
        })
        .toBe(true);
      expect(out).toMatch(/kubeconfig\s+\/\S+kubeconfig/);
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    expect(out).toContain('vcuda local: stopped');
  }, 150_000);
});
