/**
 * The part of a `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration the simulated
 * scheduler honours: its extenders and the per-pod backoff, with kube-scheduler's defaults and
 * validation rules.
 */
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import {
  fieldErrorsFromZod,
  KNOWN_MIG_PROFILES,
  migResourceName,
  resourceNames,
  ValidationError,
} from '../../contract/index.js';

const durationSeconds = z
  .string()
  .regex(/^\d+(\.\d+)?(ms|s|m)$/, 'a duration such as 5s')
  .transform((d) => {
    const n = Number.parseFloat(d);
    return d.endsWith('ms') ? n / 1000 : d.endsWith('m') ? n * 60 : n;
  });

/** `tlsConfig` of an extender (the `*Data` fields are base64 bytes, as in JSON). */
const tlsConfigSchema = z
  .object({
    insecure: z.boolean().default(false),
    serverName: z.string().default(''),
    certFile: z.string().default(''),
    keyFile: z.string().default(''),
    caFile: z.string().default(''),
    certData: z.string().default(''),
    keyData: z.string().default(''),
    caData: z.string().default(''),
  })
  .strict();

const extenderSchema = z
  .object({
    urlPrefix: z.string().url(),
    filterVerb: z.string().default(''),
    prioritizeVerb: z.string().default(''),
    bindVerb: z.string().default(''),
    preemptVerb: z.string().default(''),
    weight: z.number().int().default(0),
    enableHTTPS: z.boolean().default(false),
    tlsConfig: tlsConfigSchema.optional(),
    httpTimeout: durationSeconds.optional(),
    nodeCacheCapable: z.boolean().default(false),
    ignorable: z.boolean().default(false),
    managedResources: z
      .array(z.object({ name: z.string().min(1), ignoredByScheduler: z.boolean().default(false) }))
      .default([]),
  })
  .refine((e) => !e.prioritizeVerb || e.weight > 0, {
    message: 'weight must be positive when prioritizeVerb is set',
    path: ['weight'],
  });

const configSchema = z
  .object({
    apiVersion: z.literal('kubescheduler.config.k8s.io/v1'),
    kind: z.literal('KubeSchedulerConfiguration'),
    podInitialBackoffSeconds: z.number().int().positive().default(1),
    podMaxBackoffSeconds: z.number().int().positive().default(10),
    profiles: z
      .array(z.object({ schedulerName: z.string().min(1).default('default-scheduler') }).passthrough())
      .default([]),
    extenders: z
      .array(extenderSchema)
      .default([])
      .refine((list) => list.filter((e) => e.bindVerb).length <= 1, { message: 'only one extender may set bindVerb' }),
  })
  .refine((c) => c.podMaxBackoffSeconds >= c.podInitialBackoffSeconds, {
    message: 'must be greater than or equal to podInitialBackoffSeconds',
    path: ['podMaxBackoffSeconds'],
  });

export type ExtenderConfig = z.infer<typeof extenderSchema> & { httpTimeoutMs: number };
export type ExtenderTlsConfig = z.infer<typeof tlsConfigSchema>;
export type SchedulerConfig = {
  extenders: ExtenderConfig[];
  /** Pods whose `spec.schedulerName` is one of these are this scheduler's (its profiles). */
  schedulerNames: string[];
  /** Per-pod backoff after a failed attempt: the initial delay doubling per attempt up to the max. */
  backoff: { initialMs: number; maxMs: number };
};

export function parseSchedulerConfig(doc: unknown): SchedulerConfig {
  const parsed = configSchema.safeParse(doc);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'KubeSchedulerConfiguration');
  const profiles = parsed.data.profiles.map((p) => p.schedulerName);
  return {
    extenders: parsed.data.extenders.map((e) => ({ ...e, httpTimeoutMs: Math.round((e.httpTimeout || 5) * 1000) })),
    schedulerNames: profiles.length ? profiles : ['default-scheduler'],
    backoff: {
      initialMs: parsed.data.podInitialBackoffSeconds * 1000,
      maxMs: parsed.data.podMaxBackoffSeconds * 1000,
    },
  };
}

/** A path inside the scheduler's container, where `mounts` (container directory -> local directory) put it. */
function mounted(path: string, mounts: Record<string, string>): string {
  for (const [inContainer, local] of Object.entries(mounts)) {
    if (path.startsWith(`${inContainer.replace(/\/$/, '')}/`))
      return `${local}${path.slice(inContainer.replace(/\/$/, '').length)}`;
  }
  return path;
}

/**
 * Reads the configuration file; `rebase` replaces each extender's scheme, host and port (the
 * file names the in-cluster Service, the sim a loopback port) and keeps its path. The Service's
 * host name stays the TLS server name, as DNS would have resolved it to the same server.
 * `mounts` places the files the scheduler's volumes hold (its client certificate).
 */
export async function loadSchedulerConfig(
  path: string,
  rebase?: string,
  mounts: Record<string, string> = {},
): Promise<SchedulerConfig> {
  const cfg = parseSchedulerConfig(parseYaml(await readFile(path, 'utf8')));
  return {
    ...cfg,
    extenders: cfg.extenders.map((e) => {
      const from = new URL(e.urlPrefix);
      const to = rebase ? new URL(rebase) : from;
      const tls = e.tlsConfig && {
        ...e.tlsConfig,
        serverName: e.tlsConfig.serverName || from.hostname,
        certFile: e.tlsConfig.certFile && mounted(e.tlsConfig.certFile, mounts),
        keyFile: e.tlsConfig.keyFile && mounted(e.tlsConfig.keyFile, mounts),
        caFile: e.tlsConfig.caFile && mounted(e.tlsConfig.caFile, mounts),
      };
      return {
        ...e,
        urlPrefix: `${to.origin}${from.pathname.replace(/\/$/, '')}`,
        enableHTTPS: to.protocol === 'https:',
        ...(tls ? { tlsConfig: tls } : {}),
      };
    }),
  };
}

/** The extender wiring vcuda ships, used when no configuration file is at hand. */
export function defaultSchedulerConfig(controlPlaneUrl: string, domain = 'nvidia.com'): SchedulerConfig {
  return parseSchedulerConfig({
    apiVersion: 'kubescheduler.config.k8s.io/v1',
    kind: 'KubeSchedulerConfiguration',
    extenders: [
      {
        urlPrefix: `${controlPlaneUrl.replace(/\/$/, '')}/scheduler`,
        filterVerb: 'filter',
        prioritizeVerb: 'prioritize',
        bindVerb: 'bind',
        preemptVerb: 'preempt',
        weight: 1,
        httpTimeout: '5s',
        nodeCacheCapable: true,
        managedResources: [
          { name: `${domain}/vcuda-core`, ignoredByScheduler: true },
          { name: `${domain}/vcuda-memory`, ignoredByScheduler: true },
          // Whole MIG instances: the node's count of free ones is a first cut, as in kube-scheduler.
          ...KNOWN_MIG_PROFILES.map((p) => ({
            name: migResourceName(resourceNames(domain), p),
            ignoredByScheduler: false,
          })),
        ],
      },
    ],
  });
}
