/**
 * The node agent's one configuration object: parsed once at start from an optional file, env and
 * flags (later wins: flags over env over the file), defaults filled in here, frozen, and passed down.
 * Nothing below main.ts reads process.env.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import {
  DEFAULT_DRA_DRIVER,
  DEFAULT_RESOURCE_DOMAIN,
  fieldErrorsFromZod,
  MIG_PROFILE_PATTERN,
  MIG_PROFILE_RULE,
  resourceDomainProblem,
  ValidationError,
} from '../contract/index.js';
import { COMPUTE_SENSORS, DEFAULT_COMPUTE_SENSOR } from './card-sampling/compute-sensor.js';

export const configSchema = z.object({
  nodeName: z.string().min(1),
  resourceDomain: z
    .string()
    .default(DEFAULT_RESOURCE_DOMAIN)
    .superRefine((domain, ctx) => {
      const problem = resourceDomainProblem(domain);
      if (problem) ctx.addIssue({ code: 'custom', message: problem.detail });
    }),
  /**
   * How the node offers its cards: `device-plugin` (vcuda-core / vcuda-memory extended resources,
   * any cluster) or `dra` (a DRA driver: ResourceSlices and a kubelet DRA plugin; Kubernetes 1.34+
   * with consumable capacity, see README#DRA). One agent runs one mode.
   */
  mode: z.enum(['device-plugin', 'dra']).default('device-plugin'),
  dra: z
    .object({
      /** The driver name (DeviceClass selectors, claim results, the kubelet's plugin name). */
      driverName: z
        .string()
        .default(DEFAULT_DRA_DRIVER)
        .superRefine((name, ctx) => {
          const problem = resourceDomainProblem(name);
          if (problem)
            ctx.addIssue({ code: 'custom', message: problem.detail.replace('resource domain', 'driver name') });
        }),
      /** The kubelet's plugin watcher directory; the registration socket goes here. */
      pluginsRegistryDir: z.string().default('/var/lib/kubelet/plugins_registry'),
      /** Parent of the driver's own directory (`<dir>/<driver>/`: its DRA socket and checkpoint). */
      pluginsDir: z.string().default('/var/lib/kubelet/plugins'),
      /** A card whose health failed: tainted in the slice (NoSchedule) or left out of it. */
      unhealthyCards: z.enum(['taint', 'withdraw']).default('taint'),
    })
    .prefault({}),
  mig: z
    .object({
      /**
       * MIG instances served as `vcuda-core`/`vcuda-memory` shares (core 100 = the instance's compute,
       * its memory the instance's) instead of whole as `mig-<profile>`. An instance is shared when it
       * matches every field of some entry: `{ profile: 3g.40gb }`, `{ card: 0, start: 4 }`,
       * `{ uuid: MIG-… }`. See node-agent/README.md, "Shares inside a MIG instance".
       */
      shared: z
        .array(
          z
            .object({
              profile: z.string().regex(MIG_PROFILE_PATTERN, MIG_PROFILE_RULE).optional(),
              card: z.number().int().min(0).optional(),
              start: z.number().int().min(0).max(7).optional(),
              uuid: z
                .string()
                .regex(/^MIG-[0-9a-fA-F-]+$/, 'a MIG device UUID such as MIG-1a2b3c4d-...')
                .optional(),
            })
            .strict()
            .refine((e) => Object.keys(e).length > 0, 'names at least one of profile, card, start, uuid'),
        )
        .default([]),
      /**
       * Cards kept for dynamic MIG (by NVML index, or `all` MIG-capable cards): the agent creates
       * and destroys their instances for the placements the control plane grants, publishes them
       * as `mig.dynamic` and never offers them whole or as shares. A card out of MIG mode is
       * switched into it only when it holds nothing.
       */
      dynamicCards: z
        .union([z.literal('all'), z.array(z.number().int().min(0)).max(64)], {
          error: 'must be "all" or a list of card indices (integers, 0 or more)',
        })
        .default([]),
      /**
       * Dynamic MIG's checkpoint (what it creates, before each step). Under `/run`: MIG instances
       * do not outlive a reboot, and neither may the record of them.
       */
      checkpointPath: z.string().min(1).default('/run/vcuda/dynamic-mig.json'),
    })
    .prefault({}),
  /** Size of one vcuda-memory unit in MiB; must match the webhook's and the extender's. */
  memoryUnitMiB: z.number().int().positive().default(1),
  /**
   * How vcuda-memory reaches the kubelet: `device-plugin` (one device per unit), `node-status`
   * (a node-level extended resource, patched on the Node) or `auto` (device plugin while its
   * ListAndWatch message fits `listAndWatchBudgetBytes`, node status beyond). See README.
   */
  memoryAdvertise: z.enum(['auto', 'device-plugin', 'node-status']).default('auto'),
  /** The kubelet's gRPC client keeps grpc-go's default 4 MiB receive limit; stay below it. */
  listAndWatchBudgetBytes: z
    .number()
    .int()
    .positive()
    .default(4 * 1024 * 1024 - 64 * 1024),
  kubelet: z
    .object({
      devicePluginDir: z.string().default('/var/lib/kubelet/device-plugins'),
      podResourcesSocket: z.string().default('/var/lib/kubelet/pod-resources/kubelet.sock'),
      registerRetryMs: z.number().int().positive().default(2000),
    })
    .prefault({}),
  paths: z
    .object({
      /**
       * Host dir holding one subdir per allocation, named by its device IDs: `<key>/{etc,run}/`.
       * Under `/run` (tmpfs): the regions are shared memory the containers map, written at every
       * container start and never needed across a reboot (PreStartContainer writes them again).
       */
      containersDir: z.string().default('/run/vcuda/containers'),
      /** Where the container runtime reads CDI specs; PreStart writes each container's cards there. */
      cdiSpecDir: z.string().default('/var/run/cdi'),
      /** Host path of libvcuda.so, mounted read-only into every GPU container. */
      libvcudaHostPath: z.string().default('/var/lib/vcuda/lib/libvcuda.so'),
      libvcudaContainerPath: z.string().default('/usr/lib/vcuda/libvcuda.so'),
      /** Host file holding the preload line, mounted read-only at /etc/ld.so.preload. */
      preloadHostPath: z.string().default('/var/lib/vcuda/ld.so.preload'),
      /** Driver libraries to mount: host path → container path (read-only). */
      driverLibraries: z.array(z.object({ hostPath: z.string().min(1), containerPath: z.string().min(1) })).default([]),
      devDir: z.string().default('/dev'),
      sysfsRoot: z.string().default('/sys'),
      /** Host /proc (hostPID): NVML's PIDs → containers through /proc/PID/cgroup. */
      procRoot: z.string().default('/proc'),
      jwksPath: z.string().default('/etc/vcuda/jwks/jwks.json'),
      nvmlLibrary: z.string().default('libnvidia-ml.so.1'),
      /** The CUDA driver library, asked once per card whether it offers concurrent managed access. */
      cudaLibrary: z.string().default('libcuda.so.1'),
      /** Sent with usage reports; the control plane reviews it with the API server. */
      serviceAccountTokenPath: z.string().default('/var/run/secrets/kubernetes.io/serviceaccount/token'),
    })
    .prefault({}),
  heartbeatPeriodMs: z.number().int().positive().default(30_000),
  inventoryCheckMs: z.number().int().positive().default(5_000),
  housekeepingPeriodMs: z.number().int().positive().default(60_000),
  /** A gone pod's files stay this long after their last write (a lagging pod list is not proof). */
  housekeepingGraceMs: z.number().int().min(0).default(120_000),
  usagePeriodMs: z.number().int().positive().default(10_000),
  /** Per-card utilization sampling for the compute limiter; 0 turns it off. */
  computePeriodMs: z.number().int().min(0).default(100),
  /**
   * What feeds the compute limiters: libvcuda's in-process sensor (the default; a card held whole,
   * whose launches libvcuda does not time, is read from NVML), or NVML's per-process utilization
   * where the card has it (not on MIG: there it falls back to in-process). NVML gives whole sample
   * intervals to one process when several time-slice a card, so it cannot split a shared card
   * (BENCHMARKS.md, "Real GPU"); it reads a lone tenant as well as the sensor does.
   */
  computeSensor: z.enum(COMPUTE_SENSORS).default(DEFAULT_COMPUTE_SENSOR),
  /**
   * A container whose NVML-reported memory on a card differs from its region's charge by more than
   * this (either way) is logged once and counted; reconciled on the compute sampler's period.
   */
  memoryDriftThresholdMiB: z.number().int().positive().default(256),
  /** Optional: where usage samples go (`POST {url}/api/v1/usage`); absent = not reported. */
  controlPlaneUrl: z.url().optional(),
  /** Xids that are the application's fault and must not mark a card unhealthy. */
  ignoredXids: z.array(z.number().int()).default([13, 31, 43, 45, 68, 109]),
  /** Set NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES to the granted UUIDs. */
  setVisibleDevicesEnv: z.boolean().default(true),
  http: z
    .object({ port: z.number().int().min(0).max(65535).default(9400), host: z.string().default('0.0.0.0') })
    .prefault({}),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']).default('info'),
});

export type NodeAgentConfig = Readonly<z.infer<typeof configSchema>>;

/** Env keys the loader understands; each maps onto one config field. */
const ENV_KEYS: Record<string, (v: string) => Record<string, unknown>> = {
  NODE_NAME: (v) => ({ nodeName: v }),
  VCUDA_RESOURCE_DOMAIN: (v) => ({ resourceDomain: v }),
  VCUDA_MEMORY_UNIT_MIB: (v) => ({ memoryUnitMiB: Number(v) }),
  VCUDA_MODE: (v) => ({ mode: v }),
  VCUDA_DRA_DRIVER_NAME: (v) => ({ dra: { driverName: v } }),
  VCUDA_CONTROL_PLANE_URL: (v) => ({ controlPlaneUrl: v }),
  VCUDA_JWKS_PATH: (v) => ({ paths: { jwksPath: v } }),
  VCUDA_LOG_LEVEL: (v) => ({ logLevel: v }),
  /** `all`, or card indices `0,2`: each entry left as written, so zod names a bad one. */
  VCUDA_MIG_DYNAMIC_CARDS: (v) => ({
    mig: {
      dynamicCards: v.trim() === 'all' ? 'all' : v.split(',').map((x) => (/^\s*\d+\s*$/.test(x) ? Number(x) : x)),
    },
  }),
};

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      prev && typeof prev === 'object' && !Array.isArray(prev) && v && typeof v === 'object' && !Array.isArray(v)
        ? merge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/** Parses the config from a file's object, env and flags (later wins); throws ValidationError naming fields. */
export function parseConfig(sources: {
  file?: Record<string, unknown>;
  env?: Record<string, string | undefined>;
  flags?: Record<string, unknown>;
}): NodeAgentConfig {
  let raw: Record<string, unknown> = sources.file ?? {};
  for (const [key, toPartial] of Object.entries(ENV_KEYS)) {
    const v = sources.env?.[key];
    if (v !== undefined && v !== '') raw = merge(raw, toPartial(v));
  }
  raw = merge(raw, sources.flags ?? {});
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'node-agent config');
  return deepFreeze(parsed.data);
}

/** Reads a YAML/JSON config file (YAML is a superset of JSON). */
export function readConfigFile(path: string): Record<string, unknown> {
  const value: unknown = parseYaml(readFileSync(path, 'utf8'));
  if (!value || typeof value !== 'object') throw new ValidationError([], `config file ${path} (not a mapping)`);
  return value as Record<string, unknown>;
}
