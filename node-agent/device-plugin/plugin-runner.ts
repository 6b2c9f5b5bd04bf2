/**
 * The plugins' lifecycle in one place: serve each plugin on its socket, register it with the
 * kubelet (retrying until it answers), and start everything again when the kubelet restarts:
 * a restarting kubelet deletes every socket in the directory and re-creates `kubelet.sock`
 * (PROTOCOLS.md §1.5), so either event triggers a restart.
 */
import { existsSync, type FSWatcher, watch } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { ValidationError } from '../../contract/index.js';
import type { AgentLog } from '../agent-log.js';
import { RegistrationService, unixTarget } from '../kubelet/grpc-services.js';
import { DEVICE_PLUGIN_VERSION, KUBELET_SOCKET, type RegisterRequest } from '../kubelet/protocol.js';
import type { PluginHandler, PluginServer } from './plugin-server.js';
import { startPluginServer } from './plugin-server.js';

export type PluginSpec = { handler: PluginHandler; endpoint: string };

export type RunnerLog = Pick<AgentLog, 'info' | 'warn'>;

export type RunnerOptions = {
  pluginDir: string;
  plugins: readonly PluginSpec[];
  registerRetryMs: number;
  log: RunnerLog;
  /** Called after every successful (re-)registration round; for metrics and tests. */
  onRegistered?: (round: number) => void;
};

/** One Register call; rejects with the kubelet's error. */
export function registerWithKubelet(kubeletSocket: string, request: RegisterRequest, timeoutMs = 5000): Promise<void> {
  const client = new RegistrationService(unixTarget(kubeletSocket), grpc.credentials.createInsecure());
  return new Promise<void>((resolve, reject) => {
    const register = client['Register'] as (
      req: RegisterRequest,
      opts: grpc.CallOptions,
      cb: (err: grpc.ServiceError | null) => void,
    ) => void;
    register.call(client, request, { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null) => {
      client.close();
      if (err) reject(err);
      else resolve();
    });
  });
}

export class PluginRunner {
  private servers: PluginServer[] = [];
  private watcher: FSWatcher | undefined;
  private stopped = false;
  private round = 0;
  private restarting: Promise<void> | undefined;
  private restartAgain = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private registered = false;

  constructor(private readonly opts: RunnerOptions) {}

  /** Fails when the kubelet's device-plugin directory is missing: nothing could ever register there. */
  async start(): Promise<void> {
    if (!existsSync(this.opts.pluginDir)) {
      throw ValidationError.forField(
        'kubelet.devicePluginDir',
        'exists',
        `${this.opts.pluginDir} does not exist (is the kubelet's device-plugins directory mounted?)`,
      );
    }
    this.watcher = watch(this.opts.pluginDir, (_event, file) => this.onDirEvent(String(file ?? '')));
    await this.restart('start');
  }

  /** Whether every plugin is serving and the kubelet accepted its last registration. */
  isRegistered(): boolean {
    return this.registered && !this.stopped;
  }

  private onDirEvent(file: string): void {
    if (this.stopped) return;
    const ours = this.opts.plugins.some((p) => p.endpoint === file);
    const kubeletBack = file === KUBELET_SOCKET && existsSync(join(this.opts.pluginDir, KUBELET_SOCKET));
    // Our own restarts remove our sockets too: only a removal outside a restart is a signal.
    const oursGone = ours && !this.restarting && !existsSync(join(this.opts.pluginDir, file));
    if (kubeletBack || oursGone) {
      void this.restart(kubeletBack ? 'kubelet.sock re-created' : `${file} removed`);
    }
  }

  /** Stops every server, starts them again and registers; coalesces bursts of events. */
  restart(reason: string): Promise<void> {
    if (this.restarting) {
      this.restartAgain = true;
      return this.restarting;
    }
    this.restarting = (async () => {
      do {
        this.restartAgain = false;
        this.registered = false;
        this.opts.log.info(`device plugins: (re)starting: ${reason}`);
        await this.stopServers();
        if (this.stopped) return;
        for (const p of this.opts.plugins) {
          this.servers.push(await startPluginServer(p.handler, join(this.opts.pluginDir, p.endpoint)));
        }
        await this.registerAll();
      } while (this.restartAgain && !this.stopped);
    })().finally(() => {
      this.restarting = undefined;
    });
    return this.restarting;
  }

  private async registerAll(): Promise<void> {
    const kubeletSocket = join(this.opts.pluginDir, KUBELET_SOCKET);
    for (const p of this.opts.plugins) {
      const request: RegisterRequest = {
        version: DEVICE_PLUGIN_VERSION,
        endpoint: p.endpoint,
        resource_name: p.handler.resourceName,
        options: p.handler.options,
      };
      try {
        await registerWithKubelet(kubeletSocket, request);
        this.opts.log.info(`device plugins: registered ${p.handler.resourceName} at ${p.endpoint}`);
      } catch (err) {
        this.opts.log.warn(
          { err, resource: p.handler.resourceName },
          `device plugins: register ${p.handler.resourceName} failed; retrying in ${this.opts.registerRetryMs} ms`,
        );
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(() => void this.restart('register retry'), this.opts.registerRetryMs);
        return;
      }
    }
    this.round++;
    this.registered = true;
    this.opts.onRegistered?.(this.round);
  }

  private async stopServers(): Promise<void> {
    const servers = this.servers;
    this.servers = [];
    await Promise.all(servers.map((s) => s.stop()));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.watcher?.close();
    await this.restarting;
    await this.stopServers();
  }
}
