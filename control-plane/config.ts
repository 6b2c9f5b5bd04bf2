/**
 * The control plane's one configuration object: built once at start from a file (YAML or JSON),
 * the environment and flags (flags win, then env, then file, then defaults), validated with zod,
 * frozen and passed down. Nothing below `main.ts` reads `process.env`.
 */
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import {
  DEFAULT_RESOURCE_DOMAIN,
  fieldErrorsFromZod,
  resourceDomainProblem,
  ValidationError,
} from '../contract/index.js';
import { webhookConfigSchema } from '../webhooks/config.js';
import { DEFAULT_API_MAX_BODY_BYTES } from './app.js';
import { placementPolicies } from './placement/placement-request.js';

const port = z.number().int().min(0).max(65535);

/**
 * The largest filter/prioritize body kube-scheduler sends with nodeCacheCapable: `NodeNames` of
 * 5,000 nodes (the largest cluster Kubernetes supports) whose names take the 253 characters a
 * DNS subdomain may have, each quoted and comma-separated, plus the Pod, which the API server
 * already refused above 3 MiB, plus slack for the envelope.
 */
export const EXTENDER_MAX_BODY_BYTES = 5000 * (253 + 3) + 3 * 1024 * 1024 + 64 * 1024;

const extenderConfigSchema = z.object({
  /** HTTPS with client certificates: kube-scheduler's filter, prioritize and bind. 0 = any free port (tests). */
  port: port.default(8444),
  /** Names a client certificate must carry (its CN or a DNS SAN) to call the extender. */
  allowedClients: z.array(z.string().min(1)).min(1).default(['vcuda-scheduler']),
  /** Larger bodies get 413 before they are read whole. */
  maxBodyBytes: z.number().int().min(1024).default(EXTENDER_MAX_BODY_BYTES),
  /**
   * Filter and prioritize calls read and judged at once; more wait, unread, up to 5 s. With the
   * body limit it bounds the memory parallel calls can take.
   */
  maxConcurrentCalls: z.number().int().min(1).max(64).default(4),
  certificates: z
    .object({
      /**
       * `self`: a CA and the scheduler's client certificate in Secret `secretName` (shared by the
       * replicas, client certificate rotated before expiry); each replica serves with a
       * certificate of that CA. `files`: serving certificate, key and trusted client CA supplied
       * (cert-manager). `ephemeral`: all issued in memory at start (no cluster: tests).
       * Default: `self` with a cluster, `ephemeral` without.
       */
      mode: z.enum(['self', 'files', 'ephemeral']).optional(),
      secretName: z.string().min(1).default('vcuda-extender-tls'),
      validityDays: z.number().int().min(2).max(3650).default(365),
      rotateBeforeDays: z.number().int().min(1).default(30),
      certFile: z.string().min(1).optional(),
      keyFile: z.string().min(1).optional(),
      /** CA bundle (PEM) whose certificates may sign client certificates. */
      clientCaFile: z.string().min(1).optional(),
    })
    .refine((c) => c.rotateBeforeDays < c.validityDays, {
      path: ['rotateBeforeDays'],
      message: 'must be below validityDays',
    })
    .refine((c) => c.mode !== 'files' || (c.certFile && c.keyFile && c.clientCaFile), {
      path: ['certFile'],
      message: 'mode "files" needs certFile, keyFile and clientCaFile',
    })
    .default({ secretName: 'vcuda-extender-tls', validityDays: 365, rotateBeforeDays: 30 }),
});

export const controlPlaneConfigSchema = z
  .object({
    /** Plain HTTP: dashboard, reports, usage API, metrics, health. 0 = any free port (tests). */
    port: port.default(8080),
    host: z.string().min(1).default('0.0.0.0'),
    /** HTTPS for the admission webhooks (the API server only calls HTTPS); 0 = off. */
    httpsPort: port.default(8443),
    extender: extenderConfigSchema.default(extenderConfigSchema.parse({})),
    /** The control plane's namespace: signing-key Secret, JWKS ConfigMap, webhook certificate. */
    namespace: z.string().min(1).default('vcuda-system'),
    clusterName: z.string().min(1).default('default'),
    resourceDomain: z.string().min(1).default(DEFAULT_RESOURCE_DOMAIN),
    memoryUnitMiB: z.number().int().min(1).default(1),
    /** This replica's name in Events (the pod name in a cluster). */
    instanceId: z.string().min(1).default('vcuda-control-plane'),
    database: z
      .object({
        /** postgres://…; absent: embedded PGlite in `dataDir`, or in memory without it. */
        url: z.string().min(1).optional(),
        dataDir: z.string().min(1).optional(),
        maxConnections: z.number().int().min(1).default(10),
        /** A connection attempt without an answer fails after this (postgres.js waits 30 s by default). */
        connectTimeoutSeconds: z.number().int().min(1).max(300).default(3),
        /**
         * Deadline of each ledger call made while answering the API server (mutate's quota
         * pre-check), kube-scheduler (bind's registration, reservation, confirm, release) or the
         * readiness probe; at most half the webhook timeout.
         */
        callTimeoutMs: z.number().int().min(50).max(5_000).default(1000),
      })
      .prefault({}),
    dashboard: z
      .object({
        /** Open `/ui/stream` connections at most; more get 503 with Retry-After. */
        maxStreams: z.number().int().min(1).max(10_000).default(64),
        /** Of those, at most this many from one client address. */
        maxStreamsPerClient: z.number().int().min(1).max(10_000).default(8),
        /** The idle view lists allocations held this long with a mean SM share below 5 % over it. */
        idleForMinutes: z.number().int().min(1).max(10_080).default(30),
      })
      .prefault({}),
    kube: z
      .object({
        /** `in-cluster` (service account), `kubeconfig` (file or default), `none` (no cluster: local runs). */
        mode: z.enum(['in-cluster', 'kubeconfig', 'none']).default('in-cluster'),
        kubeconfig: z.string().min(1).optional(),
      })
      .default({ mode: 'in-cluster' }),
    placement: z
      .object({
        /** Cluster default; a pod's `<domain>/vcuda-placement` annotation overrides it. */
        default: z.enum(placementPolicies).default('binpack'),
      })
      .default({ default: 'binpack' }),
    /** A node agent silent for longer is not offered new pods. */
    heartbeatStaleSeconds: z.number().int().min(5).default(60),
    /** Signed assignments expire after this; pending ones stop blocking their container sizes after it too. */
    assignmentTtlSeconds: z.number().int().min(30).default(600),
    /** Ledger reservations a bind never confirmed are released after this (a replica died mid-bind). */
    reservationTimeoutSeconds: z.number().int().min(10).default(60),
    /**
     * Each replica renews a lease in the ledger; once it lapses (the replica died), any other
     * replica settles the reservations it left at once instead of after the timeout above.
     */
    replicaLeaseSeconds: z.number().int().min(2).max(300).default(5),
    signingKeys: z
      .object({
        source: z.enum(['secret', 'file', 'ephemeral']).default('secret'),
        /** For `file`: JSON {"keys":[{kid,alg,privateJwk,publicJwk}]}, newest first. */
        file: z.string().min(1).optional(),
        /** For `secret`: the key id of a key created on first start. */
        kid: z.string().min(1).default('vcuda-1'),
        /** Publish the public JWKS as ConfigMap vcuda-jwks (node agents mount it). */
        publishJwks: z.boolean().default(true),
      })
      .default({ source: 'secret', kid: 'vcuda-1', publishJwks: true }),
    /** `auto`: create/update the webhook configurations at start; `off`: the manifests do it. */
    webhookRegistration: z.enum(['auto', 'off']).default('auto'),
    webhook: webhookConfigSchema.partial().default({}),
    api: z
      .object({
        /**
         * Who may write usage samples: `tokenreview` checks the caller's bearer token with the
         * API server; `none` trusts whoever reaches the port (local runs). Default: `tokenreview`
         * with a cluster, `none` without one.
         */
        auth: z.enum(['tokenreview', 'none']).optional(),
        /** Usernames allowed to POST /api/v1/usage; default: the node agents' service account. */
        usageWriters: z.array(z.string().min(1)).min(1).optional(),
        /** Audiences a token must carry (TokenReview spec.audiences); empty = the API server's. */
        tokenAudiences: z.array(z.string().min(1)).default([]),
        /**
         * The node agents' usage sampling interval (their `usagePeriodMs` / 1000): a report
         * claiming a period more than half again as long is refused.
         */
        usageSamplePeriodSeconds: z.number().positive().max(2400).default(10),
        /** Largest request body /api/v1 reads; larger ones get 413 before they are read. */
        maxBodyBytes: z
          .number()
          .int()
          .min(64 * 1024)
          .max(256 * 1024 * 1024)
          .default(DEFAULT_API_MAX_BODY_BYTES),
      })
      .default({ tokenAudiences: [], maxBodyBytes: DEFAULT_API_MAX_BODY_BYTES, usageSamplePeriodSeconds: 10 }),
    logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  })
  .superRefine((c, ctx) => {
    const domainProblem = resourceDomainProblem(c.resourceDomain);
    if (domainProblem) ctx.addIssue({ code: 'custom', path: ['resourceDomain'], message: domainProblem.detail });
    if (c.signingKeys.source === 'file' && !c.signingKeys.file) {
      ctx.addIssue({ code: 'custom', path: ['signingKeys', 'file'], message: 'source "file" needs signingKeys.file' });
    }
    if (c.signingKeys.source === 'secret' && c.kube.mode === 'none') {
      ctx.addIssue({
        code: 'custom',
        path: ['signingKeys', 'source'],
        message: 'source "secret" needs a cluster; use "file" or "ephemeral" with kube.mode "none"',
      });
    }
    const webhookTimeoutMs = (c.webhook.registration?.timeoutSeconds ?? 5) * 1000;
    if (c.database.callTimeoutMs * 2 > webhookTimeoutMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['database', 'callTimeoutMs'],
        message: `must be at most half the webhook timeout (${webhookTimeoutMs} ms)`,
      });
    }
    if (c.extender.certificates.mode === 'self' && c.kube.mode === 'none') {
      ctx.addIssue({
        code: 'custom',
        path: ['extender', 'certificates', 'mode'],
        message: '"self" keeps the certificates in a Secret and needs a cluster; use "files" or "ephemeral"',
      });
    }
    if (c.api.auth === 'tokenreview' && c.kube.mode === 'none') {
      ctx.addIssue({
        code: 'custom',
        path: ['api', 'auth'],
        message: '"tokenreview" needs a cluster to review tokens; use "none" with kube.mode "none"',
      });
    }
  })
  .transform((c) => ({
    ...c,
    extender: {
      ...c.extender,
      certificates: {
        ...c.extender.certificates,
        mode: c.extender.certificates.mode ?? (c.kube.mode === 'none' ? ('ephemeral' as const) : ('self' as const)),
      },
    },
    api: {
      auth: c.api.auth ?? (c.kube.mode === 'none' ? ('none' as const) : ('tokenreview' as const)),
      usageWriters: c.api.usageWriters ?? [`system:serviceaccount:${c.namespace}:vcuda-node-agent`],
      tokenAudiences: c.api.tokenAudiences,
      maxBodyBytes: c.api.maxBodyBytes,
      usageSamplePeriodSeconds: c.api.usageSamplePeriodSeconds,
    },
  }));

export type ControlPlaneConfig = Readonly<z.infer<typeof controlPlaneConfigSchema>>;
export type ControlPlaneConfigInput = z.input<typeof controlPlaneConfigSchema>;

type Env = Readonly<Record<string, string | undefined>>;

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let cur = target;
  for (const k of keys.slice(0, -1)) {
    cur[k] = (cur[k] as Record<string, unknown> | undefined) ?? {};
    cur = cur[k] as Record<string, unknown>;
  }
  cur[keys[keys.length - 1] as string] = value;
}

function deepMerge(base: unknown, over: unknown): unknown {
  if (!over || typeof over !== 'object' || Array.isArray(over)) return over === undefined ? base : over;
  const out: Record<string, unknown> =
    base && typeof base === 'object' && !Array.isArray(base) ? { ...(base as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(over)) out[k] = deepMerge(out[k], v);
  return out;
}

/** Environment variable -> config path, and how to read it. */
export const envKeys: Record<string, [path: string, kind: 'string' | 'int' | 'bool' | 'list']> = {
  VCUDA_PORT: ['port', 'int'],
  VCUDA_HOST: ['host', 'string'],
  VCUDA_HTTPS_PORT: ['httpsPort', 'int'],
  VCUDA_NAMESPACE: ['namespace', 'string'],
  VCUDA_CLUSTER_NAME: ['clusterName', 'string'],
  VCUDA_RESOURCE_DOMAIN: ['resourceDomain', 'string'],
  VCUDA_MEMORY_UNIT_MIB: ['memoryUnitMiB', 'int'],
  VCUDA_INSTANCE_ID: ['instanceId', 'string'],
  DATABASE_URL: ['database.url', 'string'],
  VCUDA_DATA_DIR: ['database.dataDir', 'string'],
  VCUDA_DB_CONNECT_TIMEOUT_SECONDS: ['database.connectTimeoutSeconds', 'int'],
  VCUDA_DB_CALL_TIMEOUT_MS: ['database.callTimeoutMs', 'int'],
  VCUDA_DASHBOARD_MAX_STREAMS: ['dashboard.maxStreams', 'int'],
  VCUDA_DASHBOARD_MAX_STREAMS_PER_CLIENT: ['dashboard.maxStreamsPerClient', 'int'],
  VCUDA_DASHBOARD_IDLE_FOR_MINUTES: ['dashboard.idleForMinutes', 'int'],
  VCUDA_KUBE_MODE: ['kube.mode', 'string'],
  KUBECONFIG: ['kube.kubeconfig', 'string'],
  VCUDA_PLACEMENT: ['placement.default', 'string'],
  VCUDA_HEARTBEAT_STALE_SECONDS: ['heartbeatStaleSeconds', 'int'],
  VCUDA_ASSIGNMENT_TTL_SECONDS: ['assignmentTtlSeconds', 'int'],
  VCUDA_RESERVATION_TIMEOUT_SECONDS: ['reservationTimeoutSeconds', 'int'],
  VCUDA_REPLICA_LEASE_SECONDS: ['replicaLeaseSeconds', 'int'],
  VCUDA_SIGNING_KEY_SOURCE: ['signingKeys.source', 'string'],
  VCUDA_SIGNING_KEY_FILE: ['signingKeys.file', 'string'],
  VCUDA_WEBHOOK_REGISTRATION: ['webhookRegistration', 'string'],
  VCUDA_WEBHOOK_URL: ['webhook.registration.url', 'string'],
  VCUDA_WEBHOOK_SCHEDULER_NAME: ['webhook.schedulerName', 'string'],
  VCUDA_WEBHOOK_PRIVILEGED_USERNAMES: ['webhook.privilegedUsernames', 'list'],
  VCUDA_WEBHOOK_CLAIMS_DEVICE_CLASS: ['webhook.claims.deviceClassName', 'string'],
  VCUDA_WEBHOOK_CLAIMS_DRIVER: ['webhook.claims.driverName', 'string'],
  VCUDA_WEBHOOK_CLAIMS_REGISTER: ['webhook.claims.register', 'bool'],
  VCUDA_WEBHOOK_DRA_CONVERT_PODS: ['webhook.dra.convertPods', 'bool'],
  VCUDA_WEBHOOK_DRA_MODE_LABEL: ['webhook.dra.modeLabel', 'string'],
  VCUDA_WEBHOOK_CERT_MODE: ['webhook.certificates.mode', 'string'],
  VCUDA_WEBHOOK_CERT_FILE: ['webhook.certificates.certFile', 'string'],
  VCUDA_WEBHOOK_KEY_FILE: ['webhook.certificates.keyFile', 'string'],
  VCUDA_WEBHOOK_CA_FILE: ['webhook.certificates.caFile', 'string'],
  VCUDA_WEBHOOK_CALLER_CA_FILE: ['webhook.callers.clientCAFile', 'string'],
  VCUDA_WEBHOOK_CALLER_NAMES: ['webhook.callers.allowedNames', 'list'],
  VCUDA_WEBHOOK_CALLER_TOKEN_FILE: ['webhook.callers.tokenFile', 'string'],
  VCUDA_EXTENDER_PORT: ['extender.port', 'int'],
  VCUDA_EXTENDER_CERT_MODE: ['extender.certificates.mode', 'string'],
  VCUDA_EXTENDER_CERT_FILE: ['extender.certificates.certFile', 'string'],
  VCUDA_EXTENDER_KEY_FILE: ['extender.certificates.keyFile', 'string'],
  VCUDA_EXTENDER_CLIENT_CA_FILE: ['extender.certificates.clientCaFile', 'string'],
  VCUDA_API_AUTH: ['api.auth', 'string'],
  VCUDA_USAGE_SAMPLE_PERIOD_SECONDS: ['api.usageSamplePeriodSeconds', 'int'],
  VCUDA_LOG_LEVEL: ['logLevel', 'string'],
};

function fromEnv(env: Env): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, [path, kind]] of Object.entries(envKeys)) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const value =
      kind === 'int'
        ? /^\d+$/.test(raw)
          ? Number(raw)
          : raw
        : kind === 'bool'
          ? raw === 'true'
          : kind === 'list'
            ? raw
                .split(',')
                .map((x) => x.trim())
                .filter(Boolean)
            : raw;
    setPath(out, path, value);
  }
  return out;
}

/** Parses a config file's text (YAML, of which JSON is a subset). */
export function parseConfigFile(text: string, where: string): unknown {
  try {
    return parseYaml(text) ?? {};
  } catch (err) {
    throw new ValidationError(
      [{ path: where, rule: 'yaml', message: `${where}: ${(err as Error).message}` }],
      'config file',
    );
  }
}

/** Builds the one frozen config; throws ValidationError naming every bad field. */
export function loadControlPlaneConfig(sources: {
  file?: unknown;
  env?: Env;
  flags?: ControlPlaneConfigInput | Record<string, unknown>;
}): ControlPlaneConfig {
  const merged = deepMerge(deepMerge(sources.file ?? {}, fromEnv(sources.env ?? {})), sources.flags ?? {});
  const parsed = controlPlaneConfigSchema.safeParse(merged);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'control plane config');
  return Object.freeze(parsed.data);
}
