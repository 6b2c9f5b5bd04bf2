/**
 * The node agent process: build the config once, wire the real adapters (NVML, the kubelet's
 * sockets, the API server), start the agent and its HTTP server, stop cleanly on SIGTERM.
 */
import { serve } from '@hono/node-server';
import pino from 'pino';
import { boundListener, httpServerOptions } from '../contract/listener-limits.js';
import { redactingLogHooks } from '../contract/redact.js';
import { PooledKubeConfig } from '../kube-connections/pooled-kube-config.js';
import type { AgentLog } from './agent-log.js';
import { type NodeAgentConfig, parseConfig, readConfigFile } from './config.js';
import { createAgentHttp } from './http.js';
import { jwksFromFile } from './kube-adapters.js';
import { NvmlGpuSource } from './nvml/nvml-gpu-source.js';
import { HttpUsageSink, tokenFromFile } from './usage.js';
import { UsageBacklog } from './usage-backlog.js';
import { startWiredAgent, startWiredDraAgent, type WiredAgent } from './wiring.js';

export type RunOptions = {
  configFile?: string;
  flags?: Record<string, unknown>;
  env: Record<string, string | undefined>;
};

export async function runNodeAgent(opts: RunOptions): Promise<{ port: number; stop: () => Promise<void> }> {
  const config = parseConfig({
    ...(opts.configFile ? { file: readConfigFile(opts.configFile) } : {}),
    env: opts.env,
    flags: opts.flags ?? {},
  });
  const log = pino({ name: 'vcuda-node-agent', level: config.logLevel, hooks: redactingLogHooks });
  const kc = new PooledKubeConfig();
  kc.loadFromDefault();
  const gpu = new NvmlGpuSource({
    libraryPath: config.paths.nvmlLibrary,
    sysfsRoot: config.paths.sysfsRoot,
    cudaLibraryPath: config.paths.cudaLibrary,
  });
  log.info(`NVML: ${gpu.listCards().length} card(s)`);
  let wired: { agent: HttpAgent; stop(): Promise<void> };
  try {
    wired =
      config.mode === 'dra'
        ? await startWiredDraAgent(config, { kubeConfig: kc, gpu, ...usageSinkOf(config, log), log })
        : await startDeviceAgent(config, kc, gpu, log);
  } catch (err) {
    // Nothing half-started may keep the process alive: the caller exits non-zero.
    gpu.close();
    throw err;
  }
  const { agent } = wired;
  const http = createAgentHttp(agent);
  const served = { fetch: http.fetch, port: config.http.port, hostname: config.http.host };
  const server = serve({ ...served, serverOptions: httpServerOptions() });
  boundListener(server as unknown as Parameters<typeof boundListener>[0], 'plain');
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.http.port;
  log.info(`node agent for ${config.nodeName} serving /healthz and /metrics on :${port}`);
  const stop = async () => {
    await wired.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { port, stop };
}

type HttpAgent = Parameters<typeof createAgentHttp>[0];

/** The usage sink both modes report to, when the control plane's URL is configured. */
function usageSinkOf(config: NodeAgentConfig, log: AgentLog): { usageSink?: UsageBacklog } {
  if (!config.controlPlaneUrl) return {};
  // Reports the control plane cannot take now are kept and sent again: an outage loses no usage.
  const sink = new HttpUsageSink(config.controlPlaneUrl, {
    token: tokenFromFile(config.paths.serviceAccountTokenPath),
  });
  return {
    usageSink: new UsageBacklog(sink, {
      onDropped: (reports, reason) => log.warn({ reports, reason }, 'usage reports given up'),
    }),
  };
}

/** Device-plugin mode: the wired agent with its usage sink. */
function startDeviceAgent(
  config: NodeAgentConfig,
  kc: PooledKubeConfig,
  gpu: NvmlGpuSource,
  log: AgentLog,
): Promise<WiredAgent> {
  return startWiredAgent(config, {
    kubeConfig: kc,
    gpu,
    jwks: jwksFromFile(config.paths.jwksPath),
    ...usageSinkOf(config, log),
    log,
  });
}
