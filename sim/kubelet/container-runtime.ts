/**
 * The simulated container runtime: a container is a host process started with the env the
 * device plugin returned, its mounts translated to host paths (the limit file, libvcuda.so named
 * by /etc/ld.so.preload becomes LD_PRELOAD) and the fake driver on LD_LIBRARY_PATH, so a
 * simulated pod's CUDA program really runs through libvcuda.so. The node's runtime process
 * (`runtime-process.ts`, as containerd) forks them.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ContainerAllocateResponse, Mount } from '../../node-agent/kubelet/protocol.js';
import { CdiCache, type CdiEdits } from './cdi.js';
import { containerCgroupText } from './container-cgroup.js';
import { type Mirror, mirrorLimitFile } from './limit-file-mirror.js';
import { type Exit, RuntimeProcess } from './runtime-process.js';

export type RuntimeConfig = {
  /** Directory of the sim's workload binaries (`cuda-workload`); commands named after them run from there. */
  workloadDir?: string;
  /** Env every container gets first (LD_LIBRARY_PATH to the fake driver). */
  baseEnv: Record<string, string>;
  /**
   * The container runtime's device hook: env exposing the devices named in NVIDIA_VISIBLE_DEVICES
   * (its entries in order: UUIDs, indexes, `all`, `none`/`void`; empty when the variable is unset).
   */
  deviceEnv?: (devices: string[]) => Record<string, string>;
  /** Where container stdout/stderr go: `<logDir>/<podUid>-<container>.log`. */
  logDir: string;
  /** Where CDI specs live (the node agent's `paths.cdiSpecDir`). */
  cdiSpecDirs?: string[];
  /** The node's cgroup view of its containers (`container-cgroup.ts`), for the node agent's procRoot. */
  procDir?: string;
};

/** Host commands a simulated container may run; anything else idles like a long-running server. */
const HOST_COMMANDS = new Set(['sleep', 'sh', 'true', 'false', 'echo', 'cat']);
const IDLE = ['sleep', '2147483647'];

export type ContainerSpec = {
  name: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string }[];
};

/** Rewrites a container path through the mounts to the host path it comes from. */
export function hostPathOf(containerPath: string, mounts: readonly Mount[]): string | undefined {
  const m = [...mounts]
    .sort((a, b) => b.container_path.length - a.container_path.length)
    .find(
      (x) => containerPath === x.container_path || containerPath.startsWith(`${x.container_path.replace(/\/$/, '')}/`),
    );
  return m ? m.host_path + containerPath.slice(m.container_path.length) : undefined;
}

/** The process env of a container: base env, device-plugin env (paths translated), the spec's own env. */
export function containerEnv(
  spec: ContainerSpec,
  responses: readonly ContainerAllocateResponse[],
  base: Record<string, string>,
): Record<string, string> {
  const mounts = responses.flatMap((r) => r.mounts ?? []);
  const env: Record<string, string> = { ...base };
  for (const r of responses) {
    for (const [k, v] of Object.entries(r.envs ?? {})) env[k] = v.startsWith('/') ? (hostPathOf(v, mounts) ?? v) : v;
  }
  const preload = mounts.find((m) => m.container_path === '/etc/ld.so.preload');
  if (preload && existsSync(preload.host_path)) {
    const libs = readFileSync(preload.host_path, 'utf8')
      .split(/\s+/)
      .filter(Boolean)
      .map((p) => hostPathOf(p, mounts) ?? p);
    if (libs.length) env['LD_PRELOAD'] = libs.join(':');
  }
  for (const e of spec.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
  return env;
}

/** CDI edits as an Allocate answer, so their paths translate like a device plugin's mounts. */
function cdiResponse(edits: CdiEdits): ContainerAllocateResponse {
  const envs: Record<string, string> = {};
  for (const kv of edits.env) {
    const at = kv.indexOf('=');
    if (at > 0) envs[kv.slice(0, at)] = kv.slice(at + 1);
  }
  const mounts = edits.mounts.map((m) => ({
    container_path: m.containerPath,
    host_path: m.hostPath,
    read_only: m.options?.includes('ro') ?? false,
  }));
  return { envs, mounts, devices: [], annotations: {}, cdi_devices: [] };
}

/**
 * The entries of NVIDIA_VISIBLE_DEVICES in order, passed on unchanged: an entry the node does not
 * have reaches the driver, which then shows no device (the runtime would refuse the container).
 */
export function visibleDevicesOf(env: Record<string, string>): string[] {
  return (env['NVIDIA_VISIBLE_DEVICES'] ?? '')
    .split(',')
    .map((d) => d.trim())
    .filter((d) => d !== '');
}

/** What actually runs: a sim workload, an allowed host command, or an idle process. */
export function resolveCommand(spec: ContainerSpec, workloadDir: string | undefined): string[] {
  const argv = [...(spec.command ?? []), ...(spec.args ?? [])];
  const first = argv[0];
  if (!first) return IDLE;
  if (workloadDir && /^[a-z0-9-]+$/.test(first) && existsSync(join(workloadDir, first)))
    return [join(workloadDir, first), ...argv.slice(1)];
  if (HOST_COMMANDS.has(first.split('/').pop()!)) return [first.split('/').pop()!, ...argv.slice(1)];
  return IDLE;
}

export type RunningContainer = {
  /** The runtime's container id (64 hex), as in `containerd://<id>`. */
  readonly id: string;
  /** RFC 3339, second precision, as the kubelet reports it. */
  readonly startedAt: string;
  /** Host pid; undefined when the command could not be started (it then exits 127). */
  readonly pid: number | undefined;
  readonly mirror?: Mirror;
  readonly exited: Promise<Exit>;
  readonly logPath: string;
  hasExited(): boolean;
  kill(signal: NodeJS.Signals): void;
};

/**
 * Containers die with the simulated kubelet's process, even when it is killed with SIGKILL, as a
 * real node's containers stop with their node: the kernel's parent-death signal, set by setpriv
 * (util-linux), which then execs the command in place (same pid, same env), on the runtime
 * process (the kubelet's child) and on each container (the runtime's child).
 */
const DIE_WITH_KUBELET = existsSync('/usr/bin/setpriv') ? ['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--'] : [];

/** A node's containers: prepared here (env, CDI devices, limit-file mirror, log), forked by the runtime process. */
export class ContainerRuntime {
  private readonly process = new RuntimeProcess(DIE_WITH_KUBELET);
  private readonly cdi: CdiCache;

  constructor(private readonly cfg: RuntimeConfig) {
    this.cdi = new CdiCache(cfg.cdiSpecDirs ?? []);
  }

  async start(
    podUid: string,
    spec: ContainerSpec,
    responses: readonly ContainerAllocateResponse[],
  ): Promise<RunningContainer> {
    const { cfg } = this;
    const argv = resolveCommand(spec, cfg.workloadDir);
    const logPath = join(cfg.logDir, `${podUid}-${spec.name}.log`);
    const cdi = cdiResponse(this.cdi.edits(responses.flatMap((r) => (r.cdi_devices ?? []).map((d) => d.name))));
    const env = containerEnv(spec, [...responses, cdi], cfg.baseEnv);
    // The runtime applies CDI edits last: they win over the container's own env.
    Object.assign(env, containerEnv({ name: spec.name }, [cdi], {}));
    if (cfg.deviceEnv) Object.assign(env, cfg.deviceEnv(visibleDevicesOf(env)));
    const mounts = [...responses, cdi].flatMap((r) => r.mounts ?? []);
    const mirror = env['VCUDA_CONFIG']
      ? mirrorLimitFile(
          env['VCUDA_CONFIG'],
          join(cfg.logDir, `${podUid}-${spec.name}.vcuda-config`),
          (p) => hostPathOf(p, mounts) ?? p,
        )
      : undefined;
    if (mirror) env['VCUDA_CONFIG'] = mirror.path;
    const requested = [...(spec.command ?? []), ...(spec.args ?? [])];
    appendFileSync(logPath, argv === IDLE ? idleNote(requested[0], cfg.workloadDir) : '');
    const [file, ...rest] = argv;
    const id = randomBytes(32).toString('hex');
    const proc = cfg.procDir ? { procDir: cfg.procDir, cgroup: containerCgroupText(podUid, id) } : undefined;
    const child = await this.process.start(file!, rest, env, logPath, proc);
    void child.exited.then(() => mirror?.stop());
    return {
      id,
      startedAt: rfc3339Now(),
      pid: child.pid,
      exited: child.exited,
      logPath,
      hasExited: () => child.hasExited(),
      kill: (signal) => child.kill(signal),
      ...(mirror ? { mirror } : {}),
    };
  }

  /** Stops the runtime process; containers still running die with it. */
  close(): Promise<void> {
    return this.process.close();
  }
}

/** The kubelet's time format: RFC 3339 in UTC, whole seconds. */
export function rfc3339Now(): string {
  return `${new Date().toISOString().slice(0, 19)}Z`;
}

/**
 * Written to a container's log when its command is not something the simulator can run (or it has
 * none: the simulator pulls no images), with what would print something instead.
 */
function idleNote(command: string | undefined, workloadDir: string | undefined): string {
  const workloads = workloadDir && existsSync(workloadDir) ? readdirSync(workloadDir).join(', ') : 'none built';
  const what = command
    ? `"${command}" is neither a simulated workload (${workloads}) nor an allowed host command (${[...HOST_COMMANDS].join(', ')})`
    : 'the container has no command and the simulator runs no images';
  return (
    `vcuda sim: ${what}; the container idles like a server and logs nothing more. ` +
    `For output, give it a command: a simulated workload (${workloads}, e.g. cuda-workload --alloc-mib 1024 --hold-seconds 600) ` +
    `or one of ${[...HOST_COMMANDS].join(', ')}\n`
  );
}

/** SIGTERM, then SIGKILL after the grace period (the sim caps it so tests stay fast). */
export async function stopContainer(c: RunningContainer, graceMs: number): Promise<void> {
  if (c.hasExited()) return;
  c.kill('SIGTERM');
  const timer = setTimeout(() => c.kill('SIGKILL'), graceMs);
  await c.exited;
  clearTimeout(timer);
}
