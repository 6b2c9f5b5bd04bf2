/**
 * `vcuda doctor`'s probes: the facts judge.ts decides on, gathered from a live installation (the
 * API server, the control plane's HTTP port and extender port, the ledger). Every probe has a
 * deadline, and a probe that fails or runs out of time becomes a fact (`{ error }`), never a crash.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import {
  AdmissionregistrationV1Api,
  ApisApi,
  type ConfigurationOptions,
  CoreV1Api,
  type CoreV1Event,
  KubeConfig,
  Observable,
  type ObservableMiddleware,
  type RequestContext,
  ResourceV1Api,
  type ResponseContext,
  type V1Pod,
  VersionApi,
} from '@kubernetes/client-node';
import { decodeProtectedHeader } from 'jose';
import { DEFAULT_DRA_DRIVER, ValidationError, vcudaAnnotations } from '../../contract/index.js';
import { JWKS_CONFIGMAP_KEY, JWKS_CONFIGMAP_NAME } from '../../control-plane/signing-keys.js';
import { VCUDA_POD_LABEL } from '../../webhooks/validate.js';
import { probeDra } from './dra-probe.js';
import {
  type AnonymousAnswer,
  type DoctorFacts,
  type ExtenderFacts,
  failed,
  type JwksFacts,
  type MigrationFacts,
  type NodeFacts,
  PENDING_SHOWN,
  type PendingPodFacts,
  type Probed,
  type UnplacedPodFacts,
  type WebhookFacts,
} from './judge.js';
import { isNotFound, kube } from './kube-call.js';

/** What the probes act on; `files` are PEM files given on the command line. */
export type ProbeTargets = {
  kubeconfig?: string;
  namespace: string;
  /** The control plane's plain HTTP port (dashboard, /readyz). */
  url?: string;
  extender?: { url: string; certFile?: string; keyFile?: string; caFile?: string };
  databaseUrl?: string;
  heartbeatStaleMs: number;
  /** The DRA driver, which names vcuda's DeviceClass too (default gpu.vcuda.io). */
  draDriver?: string;
  /** Each probe's deadline. */
  timeoutMs: number;
  now?: () => Date;
};

/** Where the webhook's serving certificate lives: self-issued, or the cert-manager overlay's. */
export const WEBHOOK_TLS_SECRETS = ['vcuda-webhook-tls', 'vcuda-webhook-serving'] as const;
export const EXTENDER_TLS_SECRET = 'vcuda-extender-tls';
const MANAGED_BY_VCUDA = 'app.kubernetes.io/managed-by=vcuda';
/** Enough vcuda pods to learn which keys sign assignments and which wait, without listing a whole large cluster. */
const POD_SAMPLE = 500;

/** The error's message, and its cause's where the message does not already say it. */
const messageWithCauseOf = (err: unknown): string => {
  const e = err as { code?: unknown; message?: string; cause?: { message?: string } };
  const base = e.message ?? String(err);
  return e.cause?.message && !base.includes(e.cause.message) ? `${base} (${e.cause.message})` : base;
};

/** `work` within `timeoutMs`, its error or timeout as `{ error }`; `work` gets a signal that aborts at the deadline. */
export async function attempt<T>(timeoutMs: number, work: (signal: AbortSignal) => Promise<T>): Promise<Probed<T>> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<{ error: string }>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve({ error: `no answer within ${timeoutMs / 1000} s` });
    }, timeoutMs);
  });
  const done = work(controller.signal).then(
    (v) => v,
    (err: unknown) => ({ error: messageWithCauseOf(err) }),
  );
  try {
    return await Promise.race([done, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** client-node call options that abort the request with `signal`. */
function withSignal(signal: AbortSignal): ConfigurationOptions {
  const middleware: ObservableMiddleware = {
    pre: (ctx: RequestContext) => {
      ctx.setSignal(signal);
      return new Observable(Promise.resolve(ctx));
    },
    post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}

type Kube = {
  core: CoreV1Api;
  admission: AdmissionregistrationV1Api;
  version: VersionApi;
  apis: ApisApi;
  resource: ResourceV1Api;
};

function kubeClients(kubeconfig: string | undefined): Kube {
  const kc = new KubeConfig();
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else kc.loadFromDefault();
  // client-node refuses a plain http:// server unless told to skip TLS checks, which there are
  // none of; kubectl accepts it (local mode's kubeconfig is one).
  kc.loadFromOptions({
    clusters: kc.clusters.map((c) => (c.server.startsWith('http:') ? { ...c, skipTLSVerify: true } : c)),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return {
    core: kc.makeApiClient(CoreV1Api),
    admission: kc.makeApiClient(AdmissionregistrationV1Api),
    version: kc.makeApiClient(VersionApi),
    apis: kc.makeApiClient(ApisApi),
    resource: kc.makeApiClient(ResourceV1Api),
  };
}

async function listWebhooks(k: Kube, signal: AbortSignal): Promise<WebhookFacts[]> {
  const o = withSignal(signal);
  const [mutating, validating] = await Promise.all([
    kube('list mutating webhook configurations', () =>
      k.admission.listMutatingWebhookConfiguration({ labelSelector: MANAGED_BY_VCUDA }, o),
    ),
    kube('list validating webhook configurations', () =>
      k.admission.listValidatingWebhookConfiguration({ labelSelector: MANAGED_BY_VCUDA }, o),
    ),
  ]);
  const facts = (kind: WebhookFacts['kind'], list: typeof mutating | typeof validating): WebhookFacts[] =>
    list.items.flatMap((c) =>
      (c.webhooks ?? []).map((w) => ({
        configName: c.metadata?.name ?? '',
        kind,
        hook: w.name,
        caBundlePem: Buffer.from(w.clientConfig.caBundle ?? '', 'base64').toString('utf8'),
      })),
    );
  return [...facts('mutating', mutating), ...facts('validating', validating)];
}

/** A Secret's data, decoded; undefined when it does not exist. */
async function readSecret(k: Kube, ns: string, name: string, signal: AbortSignal) {
  try {
    const s = await kube(`read secret ${ns}/${name}`, () =>
      k.core.readNamespacedSecret({ namespace: ns, name }, withSignal(signal)),
    );
    const data = Object.entries(s.data ?? {}).map(([key, v]) => [key, Buffer.from(v, 'base64').toString('utf8')]);
    return Object.fromEntries(data) as Record<string, string>;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

async function listNodes(k: Kube, signal: AbortSignal): Promise<NodeFacts[]> {
  const list = await kube('list nodes', () => k.core.listNode({}, withSignal(signal)));
  return list.items.map((n) => {
    const annotations = n.metadata?.annotations ?? {};
    const heartbeat = annotations[vcudaAnnotations.heartbeat];
    return {
      name: n.metadata?.name ?? '',
      ...(heartbeat ? { heartbeat } : {}),
      hasInventory: vcudaAnnotations.inventory in annotations,
      gpuLabelled: n.metadata?.labels?.['vcuda.io/node'] === 'true',
      deviceResources: Object.entries(n.status?.allocatable ?? {}).some(
        ([name, value]) => name.endsWith('/vcuda-core') && value !== '0',
      ),
    };
  });
}

async function listVcudaPods(k: Kube, signal: AbortSignal): Promise<V1Pod[]> {
  const pods = await kube('list vcuda pods', () =>
    k.core.listPodForAllNamespaces({ labelSelector: VCUDA_POD_LABEL, limit: POD_SAMPLE }, withSignal(signal)),
  );
  return pods.items;
}

/**
 * Failed pods asking vcuda-core that the kubelet refused at admission (a device plugin's Allocate
 * refused): GPU pods placed around vcuda. Failed pods carry no vcuda label (admission never saw
 * them), so they are found by phase and then by what they ask.
 */
async function listUnplacedPods(k: Kube, signal: AbortSignal): Promise<UnplacedPodFacts[]> {
  const failedPods = await kube('list failed pods', () =>
    k.core.listPodForAllNamespaces({ fieldSelector: 'status.phase=Failed', limit: POD_SAMPLE }, withSignal(signal)),
  );
  const asksCore = (p: V1Pod) =>
    [...(p.spec?.containers ?? []), ...(p.spec?.initContainers ?? [])].some((c) =>
      Object.keys({ ...c.resources?.limits, ...c.resources?.requests }).some((r) => r.endsWith('/vcuda-core')),
    );
  return failedPods.items
    .filter((p) => p.status?.reason === 'UnexpectedAdmissionError' && asksCore(p))
    .map((p) => ({
      namespace: p.metadata?.namespace ?? 'default',
      name: p.metadata?.name ?? '',
      node: p.spec?.nodeName ?? '(none)',
      message: p.status?.message ?? '',
    }));
}

/** Key ids in the protected headers of running pods' assignments; unreadable tokens are skipped. */
function assignmentKids(pods: readonly V1Pod[]): string[] {
  return pods.flatMap((p) => {
    const token = p.metadata?.annotations?.[vcudaAnnotations.assignment];
    if (!token || p.status?.phase !== 'Running') return [];
    try {
      const kid = decodeProtectedHeader(token).kid;
      return kid ? [kid] : [];
    } catch {
      return [];
    }
  });
}

/** The newest Warning event of a pod, as `Reason: message`. */
async function lastWarning(k: Kube, pod: V1Pod, signal: AbortSignal): Promise<string | undefined> {
  const namespace = pod.metadata?.namespace ?? 'default';
  const name = pod.metadata?.name ?? '';
  const events = await kube(`list events of ${namespace}/${name}`, () =>
    k.core.listNamespacedEvent(
      { namespace, fieldSelector: `involvedObject.name=${name},type=Warning` },
      withSignal(signal),
    ),
  );
  const when = (e: CoreV1Event) =>
    new Date(e.lastTimestamp ?? e.eventTime ?? e.metadata?.creationTimestamp ?? 0).getTime();
  const newest = events.items.sort((x, y) => when(y) - when(x))[0];
  return newest ? `${newest.reason ?? 'Warning'}: ${(newest.message ?? '').trim().slice(0, 300)}` : undefined;
}

/** Pending vcuda pods, the first few with their newest warning (what kubectl describe shows last). */
async function pendingPods(k: Kube, pods: readonly V1Pod[], shown: number, signal: AbortSignal) {
  const pending = pods.filter((p) => p.status?.phase === 'Pending' && !p.spec?.nodeName);
  return Promise.all(
    pending.map(async (p, i): Promise<PendingPodFacts> => {
      const warning = i < shown ? await lastWarning(k, p, signal).catch(() => undefined) : undefined;
      const created = p.metadata?.creationTimestamp;
      return {
        namespace: p.metadata?.namespace ?? 'default',
        name: p.metadata?.name ?? '',
        schedulerName: p.spec?.schedulerName ?? 'default-scheduler',
        ...(created ? { createdAt: new Date(created).toISOString() } : {}),
        ...(warning ? { lastWarning: warning } : {}),
      };
    }),
  );
}

async function readJwksText(k: Kube, ns: string, signal: AbortSignal): Promise<string | undefined> {
  try {
    const cm = await kube(`read configmap ${ns}/${JWKS_CONFIGMAP_NAME}`, () =>
      k.core.readNamespacedConfigMap({ namespace: ns, name: JWKS_CONFIGMAP_NAME }, withSignal(signal)),
    );
    return cm.data?.[JWKS_CONFIGMAP_KEY];
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** GET /readyz of the control plane's plain HTTP port. */
async function readiness(url: string, signal: AbortSignal) {
  const res = await fetch(`${url.replace(/\/$/, '')}/readyz`, { signal });
  return { status: res.status, body: (await res.text()).slice(0, 2000) };
}

/** Applied migrations (drizzle's bookkeeping, as db/migrate.ts keeps it) next to the ones this vcuda ships. */
export async function probeMigrations(databaseUrl: string, timeoutMs: number): Promise<MigrationFacts> {
  // Loaded here, not with the doctor: only --database-url needs the database drivers.
  const [{ sql }, { closeDb, connectDb, rowsOf }, { MIGRATIONS_FOLDER }, { pgErrorCode }] = await Promise.all([
    import('drizzle-orm'),
    import('../../db/connect.js'),
    import('../../db/migrate.js'),
    import('../../db/pg-errors.js'),
  ]);
  // The journal is what drizzle's readMigrationFiles orders by: `when` is each migration's folderMillis.
  const journal = JSON.parse(readFileSync(`${MIGRATIONS_FOLDER}/meta/_journal.json`, 'utf8')) as {
    entries: { tag: string; when: number }[];
  };
  const known = journal.entries.map((e) => ({ tag: e.tag, millis: e.when }));
  const db = await connectDb({
    url: databaseUrl,
    maxConnections: 1,
    connectTimeoutSeconds: Math.max(1, Math.ceil(timeoutMs / 1000)),
  });
  try {
    const rows = rowsOf<{ created_at: string | number | null }>(
      await db.execute(sql`select created_at from drizzle.__drizzle_migrations`),
    );
    return { known, appliedMillis: rows.map((r) => Number(r.created_at ?? -1)) };
  } catch (err) {
    // No bookkeeping table (or schema) yet: nothing was ever migrated.
    if (['42P01', '3F000'].includes(pgErrorCode(err) ?? '')) return { known, appliedMillis: [] };
    throw err;
  } finally {
    await closeDb(db);
  }
}

export type Tls = { cert?: string; key?: string; ca?: string };
type Answer = { status: number; body: string };

/** Harmless filter args: a pod that asks for no GPU and no nodes; the extender echoes them. */
const PROBE_FILTER_ARGS = JSON.stringify({
  Pod: { metadata: { name: 'vcuda-doctor', namespace: 'default', uid: 'vcuda-doctor' }, spec: { containers: [] } },
  NodeNames: [],
});

/**
 * One POST to the extender's filter. With a CA the server's chain is verified, but not its name:
 * the doctor often reaches the Service through a port-forward (127.0.0.1), which the serving
 * certificate does not name. Without a CA nothing is verified; only harmless args are sent.
 */
function postFilter(base: string, tls: Tls, signal: AbortSignal): Promise<Answer> {
  const url = new URL(`${base.replace(/\/$/, '')}/scheduler/filter`);
  const secure = url.protocol === 'https:';
  const options: https.RequestOptions = {
    method: 'POST',
    agent: false,
    signal,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(PROBE_FILTER_ARGS) },
    ...(secure
      ? {
          rejectUnauthorized: Boolean(tls.ca),
          checkServerIdentity: () => undefined,
          ...(tls.ca ? { ca: tls.ca } : {}),
          ...(tls.cert && tls.key ? { cert: tls.cert, key: tls.key } : {}),
        }
      : {}),
  };
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(PROBE_FILTER_ARGS);
  });
}

/** A refusal in the TLS handshake (no client certificate) rather than an unreachable server. */
function handshakeRefusal(err: unknown): string | undefined {
  const code = String((err as { code?: unknown }).code ?? '');
  if (code.startsWith('ERR_SSL_') || code === 'ECONNRESET') return `${code}: ${(err as Error).message}`;
  return undefined;
}

async function anonymousCall(url: string, signal: AbortSignal): Promise<AnonymousAnswer> {
  try {
    return { status: (await postFilter(url, {}, signal)).status };
  } catch (err) {
    const refused = url.startsWith('https:') ? handshakeRefusal(err) : undefined;
    if (refused) return { handshakeRefused: refused };
    throw err;
  }
}

/** The scheduler's client credentials: the files given, else the Secret the control plane keeps. */
export async function clientCredentials(
  t: NonNullable<ProbeTargets['extender']>,
  secret: () => Promise<Record<string, string> | undefined>,
): Promise<Tls | undefined> {
  const read = (f: string | undefined) => (f ? readFileSync(f, 'utf8') : undefined);
  if (t.certFile || t.keyFile) {
    if (!(t.certFile && t.keyFile)) {
      const [missing, given] = t.certFile
        ? ['--extender-key', '--extender-cert']
        : ['--extender-cert', '--extender-key'];
      throw ValidationError.forField(missing, 'required', `is required with ${given} (they go together)`);
    }
    return { cert: read(t.certFile)!, key: read(t.keyFile)!, ...(t.caFile ? { ca: read(t.caFile)! } : {}) };
  }
  const data = await secret().catch(() => undefined);
  if (!data?.['tls.crt'] || !data['tls.key']) return undefined;
  const ca = read(t.caFile) ?? data['ca.crt'];
  return { cert: data['tls.crt'], key: data['tls.key'], ...(ca ? { ca } : {}) };
}

export async function probeExtender(
  t: NonNullable<ProbeTargets['extender']>,
  creds: Tls | undefined,
  timeoutMs: number,
): Promise<ExtenderFacts> {
  const [anonymous, withClientCert] = await Promise.all([
    attempt(timeoutMs, (s) => anonymousCall(t.url, s)),
    creds ? attempt(timeoutMs, (s) => postFilter(t.url, creds, s)) : Promise.resolve(undefined),
  ]);
  return {
    url: t.url,
    anonymous,
    ...(withClientCert ? { withClientCert } : {}),
    ...(creds?.cert ? { clientCertPem: creds.cert } : {}),
  };
}

/** Every fact, probes side by side; with no API server the cluster facts are its error. */
export async function gatherFacts(t: ProbeTargets): Promise<DoctorFacts> {
  const ms = t.timeoutMs;
  const ns = t.namespace;
  const k = kubeClients(t.kubeconfig);
  const apiServer = await attempt(ms, async (s) => ({
    version: (await kube('get /version', () => k.version.getCode({}, withSignal(s)))).gitVersion,
  }));
  const cluster = <T>(work: (s: AbortSignal) => Promise<T>): Promise<Probed<T>> =>
    failed(apiServer) ? Promise.resolve({ error: apiServer.error }) : attempt(ms, work);
  const creds = t.extender
    ? await clientCredentials(t.extender, async () => {
        const data = await cluster((s) => readSecret(k, ns, EXTENDER_TLS_SECRET, s));
        return failed(data) ? undefined : data;
      })
    : undefined;
  const [webhooks, servingCert, nodes, jwksText, pods, unplaced, dra, ready, extender, migrated] = await Promise.all([
    cluster((s) => listWebhooks(k, s)),
    cluster(async (s) => {
      for (const name of WEBHOOK_TLS_SECRETS) {
        const data = await readSecret(k, ns, name, s);
        if (data) return data;
      }
      return undefined;
    }),
    cluster((s) => listNodes(k, s)),
    cluster((s) => readJwksText(k, ns, s)),
    cluster((s) => listVcudaPods(k, s)),
    cluster((s) => listUnplacedPods(k, s)),
    cluster((s) => probeDra(k, t.draDriver ?? DEFAULT_DRA_DRIVER, withSignal(s))),
    t.url ? attempt(ms, (s) => readiness(t.url!, s)) : undefined,
    t.extender ? probeExtender(t.extender, creds, ms) : undefined,
    t.databaseUrl ? attempt(ms * 2, () => probeMigrations(t.databaseUrl!, ms)) : undefined,
  ]);
  const jwks: Probed<JwksFacts> = failed(jwksText)
    ? jwksText
    : { jwks: jwksText, assignmentKids: failed(pods) ? pods : assignmentKids(pods) };
  const pending = failed(pods) ? pods : await cluster((s) => pendingPods(k, pods, PENDING_SHOWN, s));
  return {
    now: t.now?.() ?? new Date(),
    namespace: ns,
    heartbeatStaleMs: t.heartbeatStaleMs,
    apiServer,
    webhooks,
    servingCertPem: failed(servingCert) ? servingCert : servingCert?.['tls.crt'],
    nodes,
    jwks,
    pendingPods: pending,
    unplacedPods: unplaced,
    dra,
    ...(ready ? { readiness: ready } : {}),
    ...(extender ? { extender } : {}),
    ...(migrated ? { migrations: migrated } : {}),
  };
}
