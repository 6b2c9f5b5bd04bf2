/**
 * Start time and memory of the two production processes, run through tsx (a checkout's
 * `bin/vcuda.js`) and compiled (`npm run build`'s `dist/cli/main.js`, what the image runs):
 * milliseconds from spawn until the HTTP endpoint answers (control plane: `/healthz` with embedded
 * PGlite and no Kubernetes; node agent: `/metrics` on native/'s fake NVML, a stand-in API server
 * and no kubelet yet), and the process's resident memory at that moment.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Benchmark, type Figure, percentile } from './harness.js';

const ROUNDS = 3;

type Runner = { label: 'tsx' | 'compiled'; entry: string };
type Started = { ms: number; rssMiB: number };

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB$/m);
  return line ? Math.round(Number(line[1]) / 1024) : Number.NaN;
}

/** Spawns `node ENTRY args` and polls `url` until it answers `ok`; returns the time and the RSS then. */
async function timeStart(entry: string, args: string[], url: string, env: NodeJS.ProcessEnv): Promise<Started> {
  const started = performance.now();
  // bin/vcuda.js runs a fresh build when there is one: the tsx figures must come from the sources.
  const sources = { ...env, VCUDA_FROM_SOURCES: '1' };
  const child: ChildProcess = spawn(process.execPath, [entry, ...args], {
    env: sources,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`startup: ${entry} ${args[0]} exited ${child.exitCode}: ${stderr}`);
      if (Date.now() > deadline) throw new Error(`startup: ${url} did not answer within 60 s: ${stderr}`);
      const ok = await fetch(url).then(
        (res) => res.ok,
        () => false,
      );
      if (ok) return { ms: performance.now() - started, rssMiB: rssMiB(child.pid as number) };
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    child.kill('SIGTERM');
    if (child.exitCode === null) await once(child, 'exit');
  }
}

/** A stand-in API server: empty lists, open watches, every write accepted (the node agent's needs). */
async function standInApiServer(): Promise<Server> {
  const api = createServer((req, res) => {
    req.resume();
    res.setHeader('content-type', 'application/json');
    if (req.url?.includes('watch=true')) {
      res.writeHead(200);
      res.flushHeaders();
      return;
    }
    res.end(req.method === 'GET' ? JSON.stringify({ metadata: { resourceVersion: '1' }, items: [] }) : '{}');
  });
  await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
  return api;
}

function nodeAgentFiles(root: string, repo: string, apiPort: number): { config: string; kubeconfig: string } {
  mkdirSync(join(root, 'device-plugins'), { recursive: true });
  writeFileSync(join(root, 'jwks.json'), '{"keys":[]}');
  const config = join(root, 'node-agent.json');
  const kubeconfig = join(root, 'kubeconfig');
  const nvmlLibrary = join(repo, 'native/build/fake/libnvidia-ml.so.1');
  writeFileSync(
    config,
    JSON.stringify({
      kubelet: { devicePluginDir: join(root, 'device-plugins'), podResourcesSocket: join(root, 'pod-resources.sock') },
      paths: {
        containersDir: join(root, 'containers'),
        preloadHostPath: join(root, 'ld.so.preload'),
        jwksPath: join(root, 'jwks.json'),
        nvmlLibrary,
        sysfsRoot: root,
      },
      logLevel: 'fatal',
    }),
  );
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${apiPort}`, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: {} }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  return { config, kubeconfig };
}

async function controlPlane(runner: Runner, root: string): Promise<Started> {
  const [port, extenderPort] = [await freePort(), await freePort()];
  const config = join(root, 'control-plane.json');
  writeFileSync(config, JSON.stringify({ extender: { port: extenderPort } }));
  const args = ['control-plane', '--config', config, '--kube-mode', 'none', '--signing-key-source', 'ephemeral'];
  args.push('--host', '127.0.0.1', '--port', String(port), '--https-port', '0', '--log-level', 'fatal');
  return timeStart(runner.entry, args, `http://127.0.0.1:${port}/healthz`, process.env);
}

async function nodeAgent(runner: Runner, root: string, repo: string, apiPort: number): Promise<Started> {
  const port = await freePort();
  const { config, kubeconfig } = nodeAgentFiles(root, repo, apiPort);
  const env = {
    ...process.env,
    KUBECONFIG: kubeconfig,
    FAKEGPU_DEVICES: '2x81920',
    FAKEGPU_STATE: join(root, 'fakegpu.state'),
    VCUDA_PORT: String(port),
  };
  const args = ['node-agent', '--config', config, '--node-name', 'bench-node', '--port', String(port)];
  return timeStart(runner.entry, args, `http://127.0.0.1:${port}/metrics`, env);
}

function figures(component: string, runner: Runner, runs: Started[]): Figure[] {
  const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
  const rss = runs.map((r) => r.rssMiB).sort((a, b) => a - b);
  const scenario = `${runner.label}, median of ${runs.length}`;
  return [
    { name: `${component}_start_ms_${runner.label}`, value: Math.round(percentile(ms, 50)), unit: 'ms', scenario },
    { name: `${component}_rss_mib_${runner.label}`, value: percentile(rss, 50), unit: 'MiB', scenario },
  ];
}

const benchmark: Benchmark = {
  name: 'startup',
  description: 'control plane and node agent: start time and RSS, through tsx against compiled JavaScript',
  run: async ({ root: repo, log }) => {
    const root = mkdtempSync(join(tmpdir(), 'vcuda-startup-'));
    const dist = join(repo, 'node_modules/.cache/vcuda-startup-bench/dist');
    execFileSync(process.execPath, [join(repo, 'deploy/build-dist.mjs'), '--out', dist], { stdio: 'inherit' });
    const runners: Runner[] = [
      { label: 'tsx', entry: join(repo, 'bin/vcuda.js') },
      { label: 'compiled', entry: join(dist, 'cli/main.js') },
    ];
    const api = await standInApiServer();
    const apiPort = (api.address() as AddressInfo).port;
    const out: Figure[] = [];
    try {
      for (const runner of runners) {
        const cp: Started[] = [];
        const agent: Started[] = [];
        // Alternating the two processes spreads a busy machine's noise over both.
        for (let i = 0; i < ROUNDS; i++) {
          cp.push(await controlPlane(runner, root));
          agent.push(await nodeAgent(runner, root, repo, apiPort));
          log(
            `${runner.label} round ${i + 1}: control plane ${Math.round(cp.at(-1)?.ms ?? 0)} ms, node agent ${Math.round(agent.at(-1)?.ms ?? 0)} ms`,
          );
        }
        out.push(...figures('control_plane', runner, cp), ...figures('node_agent', runner, agent));
      }
    } finally {
      api.closeAllConnections();
      await new Promise<void>((r) => api.close(() => r()));
      rmSync(root, { recursive: true, force: true });
    }
    return out;
  },
};

export default benchmark;
