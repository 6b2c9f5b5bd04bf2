/**
 * The process wiring: config file + env → NVML (native/'s fake) → kubelet sockets → API server →
 * HTTP, then a clean stop. The API server is a small stand-in that records what it is sent.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../contract/index.js';
import { FakeKubelet } from '../test/support/node-agent/fake-kubelet.js';
import { runNodeAgent } from './main.js';

const here = dirname(fileURLToPath(import.meta.url));
const fakeNvml = join(here, '../native/build/fake/libnvidia-ml.so.1');
const root = mkdtempSync(join(tmpdir(), 'vcuda-main-'));
const requests: string[] = [];
const watches = new Set<ServerResponse>();
let api: Server;

beforeAll(async () => {
  api = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    req.resume();
    res.setHeader('content-type', 'application/json');
    if (req.url?.includes('watch=true')) {
      res.writeHead(200);
      res.flushHeaders();
      watches.add(res);
      req.on('close', () => watches.delete(res));
      return;
    }
    if (req.method === 'GET')
      res.end(JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '1' }, items: [] }));
    else res.end('{}');
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  const kubeconfig = join(root, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'c',
          cluster: {
            server: `http://127.0.0.1:${(api.address() as AddressInfo).port}`,
            'insecure-skip-tls-verify': true,
          },
        },
      ],
      users: [{ name: 'u', user: {} }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  process.env['KUBECONFIG'] = kubeconfig;
});
afterAll(async () => {
  for (const w of watches) w.end();
  api.closeAllConnections();
  await new Promise<void>((r) => api.close(() => r()));
  delete process.env['KUBECONFIG'];
  rmSync(root, { recursive: true, force: true });
});

describe('vcuda node-agent process', () => {
  it('refuses to start without a node name, naming the field', async () => {
    await expect(runNodeAgent({ env: {} })).rejects.toBeInstanceOf(ValidationError);
    await expect(runNodeAgent({ env: {} })).rejects.toThrow(/nodeName/);
  });

  it.skipIf(!existsSync(fakeNvml))('starts on the fake driver, registers, publishes, serves, and stops', async () => {
    const kubelet = await FakeKubelet.start(join(root, 'kubelet'));
    const jwksPath = join(root, 'jwks.json');
    writeFileSync(jwksPath, '{"keys":[]}');
    const configFile = join(root, 'config.yaml');
    writeFileSync(
      configFile,
      JSON.stringify({
        kubelet: { devicePluginDir: kubelet.pluginDir, podResourcesSocket: kubelet.podResourcesSocket },
        paths: {
          containersDir: join(root, 'containers'),
          preloadHostPath: join(root, 'ld.so.preload'),
          jwksPath,
          nvmlLibrary: fakeNvml,
          sysfsRoot: root,
        },
        http: { port: 0, host: '127.0.0.1' },
        logLevel: 'fatal',
      }),
    );
    // The fake driver keeps its machine in a state file; a fresh one makes FAKEGPU_DEVICES count.
    process.env['FAKEGPU_DEVICES'] = '2x1024';
    process.env['FAKEGPU_STATE'] = join(root, 'fakegpu.state');
    const agent = await runNodeAgent({ configFile, env: { NODE_NAME: 'n1' } });
    try {
      await kubelet.waitFor(() => kubelet.devices('nvidia.com/vcuda-core').length === 200, 'core plugin');
      await kubelet.waitFor(() => kubelet.devices('nvidia.com/vcuda-memory').length === 2048, 'memory plugin');
      const health = await fetch(`http://127.0.0.1:${agent.port}/healthz`);
      expect(health.status).toBe(200);
      const metrics = await (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text();
      expect(metrics).toMatch(/vcuda_card_memory_total_bytes\{card="GPU-[^"]+",index="1"\} 1073741824/);
      expect(requests).toContain('PATCH /api/v1/nodes/n1');
      expect(requests.some((r) => r.startsWith('GET /api/v1/pods?fieldSelector=spec.nodeName%3Dn1'))).toBe(true);
    } finally {
      await agent.stop();
      await kubelet.stop();
      delete process.env['FAKEGPU_DEVICES'];
      delete process.env['FAKEGPU_STATE'];
    }
  });

  it.skipIf(!existsSync(fakeNvml))(
    'exits non-zero, naming the field, when the device-plugin directory is missing',
    async () => {
      const configFile = join(root, 'no-plugin-dir.json');
      writeFileSync(
        configFile,
        JSON.stringify({
          kubelet: { devicePluginDir: join(root, 'absent'), podResourcesSocket: join(root, 'absent.sock') },
          paths: {
            containersDir: join(root, 'containers-absent'),
            preloadHostPath: join(root, 'ld.so.preload'),
            jwksPath: join(root, 'jwks.json'),
            nvmlLibrary: fakeNvml,
            sysfsRoot: root,
          },
          http: { port: 0, host: '127.0.0.1' },
          logLevel: 'fatal',
        }),
      );
      // Asynchronously: the stand-in API server answers from this process.
      const child = spawn(
        process.execPath,
        [join(here, '../bin/vcuda.js'), 'node-agent', '--config', configFile, '--node-name', 'n1'],
        { env: { ...process.env, FAKEGPU_DEVICES: '1x1024', FAKEGPU_STATE: join(root, 'absent.state') } },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      clearTimeout(killer);
      const run = { status: code, signal, stderr };
      expect(run.signal).toBeNull();
      expect(run.status).toBe(1);
      expect(run.stderr).toContain(`kubelet.devicePluginDir: ${join(root, 'absent')} does not exist`);
    },
  );
});
