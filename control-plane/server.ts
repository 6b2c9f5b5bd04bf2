/**
 * Starts one control-plane process from its config: database (migrated), Kubernetes connection,
 * signing keys, watch cache, ledger housekeeping, and the HTTP(S) servers of the composed app.
 * A plain function returning `{ url, close }`, so `vcuda local` and tests run it in-process.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { KubeConfig } from '@kubernetes/client-node';
import { Hono, type MiddlewareHandler } from 'hono';
import type * as jose from 'jose';
import { type Logger, pino } from 'pino';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { eventReasons, type PodRef, podEvent, resourceNames, VcudaError } from '../contract/index.js';
import { closeDb, connectDb, type VcudaDb } from '../db/connect.js';
import { createLedger } from '../db/ledger.js';
import { createLedgerProbe } from '../db/ledger-probe.js';
import { migrate } from '../db/migrate.js';
import { createReportRunner } from '../db/reports.js';
import { createUsageStore } from '../db/usage.js';
import { createAdmissionListener } from '../webhooks/admission-handler.js';
import { createAdmissionMetrics } from '../webhooks/admission-metrics.js';
import { type AdmissionRoutesDeps, admissionRoutes } from '../webhooks/admission-routes.js';
import { type ServingCertificate, serviceDnsNames } from '../webhooks/certificates.js';
import { webhookConfigSchema } from '../webhooks/config.js';
import {
  kubeCertificateSecretStore,
  kubePemSecretStore,
  kubeWebhookConfigurationClient,
} from '../webhooks/kube-adapters.js';
import { cachedQuotaPrecheck } from '../webhooks/quota-precheck.js';
import { createWebhookKeeper, type WebhookKeeper } from '../webhooks/webhook-keeper.js';
import { cachedAuthenticator, requireCaller, tokenReview } from './api/caller-auth.js';
import { reportsRoutes } from './api/reports-routes.js';
import { usageRoutes } from './api/usage-routes.js';
import { grantsOf } from './api/usage-writer.js';
import { apiRoutes, createApp } from './app.js';
import { AssignmentTrust, createAssignmentTrustMetrics, type UnverifiedAssignment } from './assignment-trust.js';
import { ClusterState } from './cluster-state.js';
import type { ControlPlaneConfig } from './config.js';
import { createLedgerDashboardSource } from './dashboard/ledger-source.js';
import { watchRefusalEvents } from './dashboard/refusal-events.js';
import { createRefusalLog } from './dashboard/refusals.js';
import { dashboardRoutes } from './dashboard/routes.js';
import { guardedExtender } from './extender/client-certificate.js';
import { createExtenderMetrics } from './extender/extender-metrics.js';
import { EXTENDER_SECRET_KEYS, type ExtenderClientCredentials } from './extender/extender-tls.js';
import { createExtenderTlsKeeper } from './extender/extender-tls-keeper.js';
import { withLedgerDeadlines } from './extender/ledger-deadlines.js';
import { LedgerNodes } from './extender/ledger-nodes.js';
import { reconcileLedger } from './extender/ledger-reconciler.js';
import { Nudger } from './extender/nudger.js';
import { PodWriteBatcher } from './extender/pod-write-batcher.js';
import { extenderRoutes } from './extender/routes.js';
import { stalledPods } from './extender/stalled-pods.js';
import { type ControlPlaneKube, createKubeClient } from './kube-client.js';
import { createLocalKube } from './local-kube.js';
import { createAssignmentSigner, type KeySet, loadSigningKeys, publishJwks } from './signing-keys.js';
import { createWatchCache, type WatchCache } from './watch-cache.js';

export type ControlPlaneOverrides = {
  /** Use this database (left open on close) instead of connecting from config. */
  db?: VcudaDb;
  /** Use this cluster connection instead of the one config describes. */
  kubeConfig?: KubeConfig;
  keys?: KeySet;
  clock?: () => Date;
  logger?: Logger;
};

export type RunningControlPlane = {
  /** Plain HTTP base url (reports and usage API, dashboard, metrics, health). */
  url: string;
  /** HTTPS base url of the webhooks, when served. */
  httpsUrl?: string;
  /** HTTPS base url of the scheduler extender (`/scheduler/...`), which needs a client certificate. */
  extenderUrl: string;
  /** With ephemeral extender certificates (no cluster): the one client certificate it trusts. */
  extenderClient?: ExtenderClientCredentials;
  app: Hono;
  /** The cluster view; with `kube.mode: none` the caller feeds it with nodes and pods. */
  state: ClusterState;
  jwks: jose.JSONWebKeySet;
  close(): Promise<void>;
};

const HOUSEKEEPING_MS = 15_000;
const RECONCILE_MS = 60_000;
const DOWNSAMPLE_MS = 3_600_000;
/** Certificate and webhook-configuration re-check; rotation happens days before expiry. */
const WEBHOOK_REFRESH_MS = 10 * 60_000;
/**
 * The watch cache may not have seen a pod yet that another replica is binding right now; only rows
 * reserved at least this long before a reconcile can be judged by the cache's pod list.
 */
const RECONCILE_GRACE_MS = 30_000;
/**
 * How long admission reuses the ledger's "ok" for the same namespace and demand: replicas of a
 * workload are created together, and each would otherwise cost a query. Refusals are not reused.
 */
const PRECHECK_REUSE_MS = 1000;
/** How long one readiness probe of the ledger answers for every /readyz in between. */
const READINESS_CACHE_MS = 2000;
/**
 * Safety net for a nudge nobody sent (a replica that refused the pod died, a free the watch
 * missed): pods kube-scheduler holds as unschedulable are nudged this often, at most a round each.
 */
const STALLED_RESYNC_MS = 60_000;
/**
 * At start, ledger rows of pods the synced cache does not hold at all (they ended while no replica
 * watched) are released if reserved before the cache's list was asked for, less this much for the
 * clocks of replicas on other machines: a pod is created before any bind reserves for it, so a
 * pod with older rows that the list and the watch since do not hold is gone.
 */
const REPLICA_CLOCK_SKEW_MS = 500;

function loadKubeConfig(config: ControlPlaneConfig, overrides: ControlPlaneOverrides): KubeConfig | undefined {
  if (overrides.kubeConfig) return overrides.kubeConfig;
  if (config.kube.mode === 'none') return undefined;
  const kc = new KubeConfig();
  if (config.kube.mode === 'in-cluster') kc.loadFromCluster();
  else if (config.kube.kubeconfig) kc.loadFromFile(config.kube.kubeconfig);
  else kc.loadFromDefault();
  return kc;
}

/**
 * An HTTPS listener's certificate; with `ca`, it also asks every client for a certificate and
 * verifies it against those CAs. The handshake completes either way, so a refused caller gets a
 * 401 that says why (`requireClientCertificate` reads the verdict) instead of a bare TLS alert.
 */
type ListenerTls = { key: string; cert: string; ca?: string };

type Listening = {
  url: string;
  close: () => Promise<void>;
  /** Swaps the TLS certificate (and trusted client CAs) of an HTTPS listener without a restart. */
  setCertificate: (tls: ListenerTls) => void;
};

type RequestFront = (req: IncomingMessage, res: ServerResponse) => boolean;

/** Serves `app`; with `tls`, HTTPS, where `front` may answer a request first (returns true). */
function listen(app: Hono, host: string, port: number, tls?: ListenerTls, front?: RequestFront): Promise<Listening> {
  return new Promise((resolve, reject) => {
    const server = serve(
      tls
        ? {
            fetch: app.fetch,
            port,
            hostname: host,
            createServer: ((options: ServerOptions, handler: RequestListener) =>
              createHttpsServer(options, (req, res) => {
                if (!front?.(req, res)) handler(req, res);
              })) as unknown as typeof createHttpsServer,
            serverOptions: tls.ca ? { ...tls, requestCert: true, rejectUnauthorized: false } : tls,
          }
        : { fetch: app.fetch, port, hostname: host },
      (info: AddressInfo) => {
        const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
        resolve({
          url: `${tls ? 'https' : 'http'}://${shown}:${info.port}`,
          setCertificate: (next) =>
            (server as unknown as { setSecureContext?: (o: ListenerTls) => void }).setSecureContext?.(next),
          close: () =>
            new Promise<void>((done) => {
              (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
              server.close(() => done());
            }),
        });
      },
    );
    server.once('error', reject);
  });
}

export async function startControlPlane(
  config: ControlPlaneConfig,
  overrides: ControlPlaneOverrides = {},
): Promise<RunningControlPlane> {
  const clock = overrides.clock ?? (() => new Date());
  const log = overrides.logger ?? pino({ level: config.logLevel, name: 'vcuda-control-plane' });
  const closers: (() => Promise<void> | void)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) {
      try {
        await c();
      } catch (err) {
        log.warn({ err }, 'shutdown step failed');
      }
    }
    closers.length = 0;
  };
  try {
    // 1. Database, migrated before anything uses it.
    const db = overrides.db ?? (await connectDb(config.database));
    if (!overrides.db) closers.push(() => closeDb(db));
    await migrate(db);
    const ledger = createLedger(db, { clock });
    // What bind and node registration call: every call with a deadline (a late reservation is released).
    const boundedLedger = withLedgerDeadlines(ledger, {
      timeoutMs: config.database.callTimeoutMs,
      onLateReservation: (podUid, err) =>
        err
          ? log.warn({ podUid, err }, 'a reservation landed after its bind failed; its release failed, expiry frees it')
          : log.info({ podUid }, 'a reservation landed after its bind failed; released'),
    });
    const ledgerProbe = createLedgerProbe(db, {
      timeoutMs: config.database.callTimeoutMs,
      cacheMs: READINESS_CACHE_MS,
    });

    // 2. Metrics, cluster connection and view. Assignments count only once verified against the
    // keys loaded in step 3; nothing is judged before (the watch starts last).
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'vcuda_control_plane_' });
    const names = resourceNames(config.resourceDomain);
    const kc = loadKubeConfig(config, overrides);
    const refusals = createRefusalLog();
    let keys: KeySet | undefined;
    let kube: ControlPlaneKube;
    const trust = new AssignmentTrust({
      jwks: () => keys?.jwks ?? NO_KEYS,
      onUnverified: unverifiedReporter(registry, log, (u) => recordUnverified(kube, u, config.instanceId, clock)),
    });
    const state = new ClusterState({ trust, quantity: { names, memoryUnitMiB: config.memoryUnitMiB } });
    let watch: WatchCache | undefined;
    const onEvent = (_ns: string, event: object) => {
      refusals.recordEvent(event as Parameters<typeof refusals.recordEvent>[0], config.clusterName);
    };
    if (kc) {
      watch = createWatchCache(kc, state, {
        onError: (err) => log.warn({ err }, 'watch failed; relisting'),
      });
      const client = createKubeClient(kc);
      kube = {
        ...client,
        createEvent: async (ns, event) => {
          onEvent(ns, event);
          await client.createEvent(ns, event);
        },
      };
    } else {
      kube = createLocalKube(state, onEvent);
    }

    // 3. Signing keys shared by every replica; the public half where node agents read it.
    keys =
      overrides.keys ??
      (await loadSigningKeys(
        config.signingKeys.source === 'secret'
          ? { kind: 'secret', namespace: config.namespace, kid: config.signingKeys.kid }
          : config.signingKeys.source === 'file'
            ? { kind: 'file', path: config.signingKeys.file as string }
            : { kind: 'ephemeral' },
        kube,
      ));
    const signingKeys = keys;
    if (kc && config.signingKeys.publishJwks) await publishJwks(kube, config.namespace, signingKeys);

    // 4. Metrics.
    const extenderMetrics = createExtenderMetrics(registry);
    new Gauge({
      name: 'vcuda_watch_cache_nodes',
      help: 'Nodes in the control plane view',
      registers: [registry],
      collect() {
        this.set(state.snapshot().nodes.size);
      },
    });

    // 5. No stalls, and the ledger follows the pods: an ended pod's rows are released at once.
    const nudger = new Nudger({
      clock,
      patch: async (t, annotations) => {
        await kube.patchPodAnnotations(t.namespace, t.name, annotations);
      },
      onNudged: () => extenderMetrics.nudges.inc(),
      onError: (t, err) => log.debug({ pod: `${t.namespace}/${t.name}`, err }, 'nudge failed'),
    });
    closers.push(() => nudger.close());
    // An allocated pod's container sizes stop being pending on its node, in the ledger that every
    // replica's binds consult; allocations arriving together are written together.
    const allocationMarks = new PodWriteBatcher(async (uids) => {
      await ledger.markAllocated(config.clusterName, uids);
      return { missing: [] };
    });
    const unsubscribe = state.onCapacityFreed((e) => {
      if (e.why === 'pod-ended' && e.pod?.uid) {
        nudger.forget(e.pod.uid);
        ledger.release(config.clusterName, e.pod.uid).catch((err) => log.warn({ err }, 'release failed'));
      }
      if (e.why === 'pod-allocated' && e.pod?.uid) {
        // Nudge once the ledger knows, or a pod waiting for this size would be refused again.
        allocationMarks
          .write(e.pod.uid)
          .catch((err) => log.warn({ err }, 'marking an allocation in the ledger failed'))
          .finally(() => nudger.capacityFreed(e));
        return;
      }
      nudger.capacityFreed(e);
    });
    closers.push(unsubscribe);
    // The ledger learns every watched node's cards in the background, so first binds do not wait for it.
    const ledgerNodes = new LedgerNodes(boundedLedger, config.clusterName);
    const registerNodes = () => {
      if (watch && !watch.isSynced()) return;
      ledgerNodes
        .ensureAll(state.snapshot().nodes.values())
        .then(
          (r) =>
            r.failed > 0 && log.warn({ failed: r.failed, err: r.firstError }, 'registering nodes in the ledger failed'),
        )
        .catch((err) => log.warn({ err }, 'registering nodes in the ledger failed'));
    };
    const housekeeping = setInterval(() => {
      registerNodes();
      ledger
        .expireReservations(config.reservationTimeoutSeconds * 1000)
        .then((n) => n > 0 && log.info({ released: n }, 'expired unconfirmed reservations'))
        .catch((err) => log.warn({ err }, 'expiring reservations failed'));
    }, HOUSEKEEPING_MS);
    housekeeping.unref();
    closers.push(() => clearInterval(housekeeping));
    if (watch) {
      const reconcile = setInterval(() => {
        if (!watch?.isSynced()) return;
        reconcileLedger({
          cluster: config.clusterName,
          ledger,
          state,
          ensureNode: (node) => ledgerNodes.ensure(node),
          clock,
          graceMs: RECONCILE_GRACE_MS,
        })
          .then((r) => {
            if (r.released.length > 0) log.info({ released: r.released.length }, 'reconciled ledger with cluster');
            if (r.restored.length > 0) {
              log.warn({ pods: r.restored }, 'ledger held nothing for running pods; restored from their assignments');
            }
            for (const f of r.refused) log.error({ pod: f.pod, reason: f.message }, 'running pod missing from ledger');
          })
          .catch((err) => log.warn({ err }, 'reconcile failed'));
      }, RECONCILE_MS);
      reconcile.unref();
      closers.push(() => clearInterval(reconcile));
    }

    // 6. The composed app.
    const webhook = webhookConfigSchema.parse({
      ...config.webhook,
      resourceDomain: config.resourceDomain,
      memoryUnitMiB: config.memoryUnitMiB,
      clusterName: config.clusterName,
    });
    const admissionDeps: AdmissionRoutesDeps = {
      names,
      memoryUnitMiB: config.memoryUnitMiB,
      clusterName: config.clusterName,
      schedulerName: webhook.schedulerName,
      privilegedUsernames: webhook.privilegedUsernames,
      maxBodyBytes: webhook.maxBodyBytes,
      observer: createAdmissionMetrics(registry),
      logger: { info: (o, m) => log.info(o, m), warn: (o, m) => log.warn(o, m) },
      precheckQuota: cachedQuotaPrecheck((q) => ledger.precheckQuota(q), { ttlMs: PRECHECK_REUSE_MS }),
      precheckTimeoutMs: config.database.callTimeoutMs,
      events: {
        record: (pod: PodRef, reason, message) =>
          kube.createEvent(
            pod.namespace,
            podEvent(pod, reason, message, {
              component: 'vcuda-webhook',
              host: config.instanceId,
              now: clock(),
              nameSuffix: `${clock().getTime().toString(36)}.${config.instanceId}.${Math.floor(performance.now())}`,
            }),
          ),
      },
    };
    const admission = admissionRoutes(admissionDeps);
    // The HTTPS listener answers reviews without building web Request/Response objects.
    const admissionListener = createAdmissionListener(admissionDeps);
    const verbs = extenderRoutes({
      config: {
        cluster: config.clusterName,
        quantity: { names, memoryUnitMiB: config.memoryUnitMiB },
        defaultPlacement: config.placement.default,
        heartbeatStaleMs: config.heartbeatStaleSeconds * 1000,
        assignmentTtlMs: config.assignmentTtlSeconds * 1000,
        instanceId: config.instanceId,
      },
      state,
      kube,
      ledger: boundedLedger,
      signer: createAssignmentSigner(signingKeys, config.assignmentTtlSeconds),
      clock,
      metrics: extenderMetrics,
      nudger,
      ledgerNodes,
      log: (msg, fields) => log.info(fields ?? {}, msg),
    });
    // Every listener mounts the verbs behind the client-certificate gate: only the extender's own
    // listener asks for a certificate, so elsewhere they answer 401 before reading a byte.
    const scheduler = guardedExtender(verbs, {
      allowedClients: config.extender.allowedClients,
      maxBodyBytes: config.extender.maxBodyBytes,
      // A certificate of the trusted CA naming someone else is worth a look; anonymous knocks are not.
      onRefused: (r) =>
        r.status === 403 ? log.warn(r, 'extender call refused') : log.debug(r, 'extender call refused'),
    });
    const reports = createReportRunner(db, { clock });
    const usageStore = createUsageStore(db, { clock });
    // Raw usage samples become hourly, then daily rows, so the table does not grow without bound.
    const downsample = setInterval(() => {
      usageStore.downsampleUsage().catch((err) => log.warn({ err }, 'usage downsampling failed'));
    }, DOWNSAMPLE_MS);
    downsample.unref();
    closers.push(() => clearInterval(downsample));
    // Usage samples feed chargeback: only the node agents write them, proven by a reviewed token.
    let usageGuard: MiddlewareHandler | undefined;
    if (config.api.auth === 'tokenreview') {
      if (!kc) throw new VcudaError('invalid', 'api.auth "tokenreview" needs a cluster connection to review tokens');
      const review = tokenReview(kc, config.api.tokenAudiences);
      usageGuard = requireCaller(cachedAuthenticator(review), config.api.usageWriters, 'POST /api/v1/usage');
    }
    // The plain-HTTP port: only what may be public (dashboard, reports, metrics, health) and the
    // node agents' usage samples (token-reviewed); the extender verbs there answer 401.
    const app = createApp({
      scheduler,
      api: apiRoutes(
        reportsRoutes({ reports }),
        usageRoutes({
          clusterName: config.clusterName,
          usage: usageStore,
          ...(usageGuard ? { guard: usageGuard } : {}),
          // A node agent reports only pods assigned to its node, on their granted cards.
          pods: (namespace, name) => state.pod(namespace, name),
          grants: (pod) =>
            grantsOf(state.heldAssignment(pod.metadata?.namespace ?? '', pod.metadata?.name ?? ''), pod.metadata?.uid),
          clock,
        }),
      ),
      dashboard: dashboardRoutes({
        source: createLedgerDashboardSource({
          db,
          idleForMinutes: config.dashboard.idleForMinutes,
          reports,
          clock,
          readRefusals: (n) => refusals.readRefusals(n),
          // Idle nodes (not in the ledger before their first bind) and card health, from the watch cache.
          readLiveNodes: () =>
            [...state.snapshot().nodes.values()].map((n) => ({
              cluster: config.clusterName,
              node: n.name,
              cards: n.cards.map(({ uuid, index, model, memoryMiB, healthy }) => ({
                uuid,
                index,
                model,
                memoryMiB,
                healthy,
              })),
            })),
        }),
        clock,
        maxStreams: config.dashboard.maxStreams,
      }),
      metrics: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
      readiness: async () => {
        if (watch && !watch.isSynced()) return { ready: false, reason: 'watch cache not synced yet' };
        const ledgerReached = await ledgerProbe.check();
        return ledgerReached.ok ? { ready: true } : { ready: false, reason: ledgerReached.reason };
      },
      log: { error: (fields, message) => log.error(fields, message) },
      apiMaxBodyBytes: config.api.maxBodyBytes,
    });

    // 7. Serve; then follow the cluster (readiness waits for the first full list).
    const http = await listen(app, config.host, config.port);
    closers.push(http.close);
    let httpsUrl: string | undefined;
    let https: Listening | undefined;
    const keeper = createKeeper(config, webhook, names, kc, clock, log, (cert) =>
      https?.setCertificate({ key: cert.keyPem, cert: cert.certPem }),
    );
    if (keeper) {
      // First pass: the certificate (issued, kept or read) and the configurations with its CA.
      const { certificate } = await keeper.refresh();
      // The webhook port: the admission reviews (the listener in front answers them first).
      https = await listen(
        createApp({ admission, scheduler }),
        config.host,
        config.httpsPort,
        { key: certificate.keyPem, cert: certificate.certPem },
        admissionListener,
      );
      closers.push(https.close);
      httpsUrl = https.url;
      // Then rotation before expiry (or renewed files) and drifted configurations, without a restart.
      closers.push(keeper.start(WEBHOOK_REFRESH_MS));
    }
    const extender = await serveExtender(config, webhook, scheduler, kc, clock, log);
    closers.push(extender.close);
    if (kc) {
      // Every replica lists every refusal of the cluster (the other replicas', the node agents'
      // VcudaAllocateFailed), not only its own. The log replaces a pod's row per reason, so this
      // replica's own events arriving twice (recorded at creation, then watched) show once.
      const events = watchRefusalEvents(kc, refusals, {
        cluster: config.clusterName,
        onError: (err) => log.warn({ err }, 'refusal event watch failed; relisting'),
      });
      closers.push(() => events.stop());
    }
    if (watch) {
      const w = watch;
      closers.push(() => w.stop());
      // kube-scheduler keeps pods refused before a restart or by a replica that died parked for up
      // to 5 minutes; this process's nudger never heard of them. Adopt them from the cache.
      const nudgeStalled = () => {
        if (!w.isSynced()) return;
        const stalled = stalledPods(state.allPods(), { names, schedulerName: webhook.schedulerName });
        if (stalled.length === 0) return;
        for (const t of stalled) nudger.rememberRefused(t);
        log.info({ pods: stalled.length }, 'nudging pods kube-scheduler holds as unschedulable');
        nudger.capacityFreed();
      };
      // Pods that ended while this process was down never reported it: their rows would hold the
      // cards until the periodic reconcile. Every pod not finished counts as live here, pending
      // ones included, so a bind in flight on another replica keeps its rows.
      const releaseVanished = async (listAskedAtMs: number) => {
        const live = [...state.allPods()]
          .filter((p) => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed')
          .map((p) => ({
            uid: p.metadata?.uid ?? '',
            namespace: p.metadata?.namespace ?? '',
            name: p.metadata?.name ?? '',
          }));
        const { released } = await ledger.reconcile(config.clusterName, live, {
          listedAt: new Date(listAskedAtMs - REPLICA_CLOCK_SKEW_MS),
        });
        if (released.length > 0) log.info({ released: released.length }, 'released the rows of pods gone while down');
      };
      const resync = setInterval(nudgeStalled, STALLED_RESYNC_MS);
      resync.unref();
      closers.push(() => clearInterval(resync));
      const listAskedAtMs = clock().getTime();
      w.start().then(
        () => {
          log.info({ nodes: state.snapshot().nodes.size }, 'watch cache synced');
          registerNodes();
          releaseVanished(listAskedAtMs)
            .catch((err) => log.warn({ err }, 'releasing the rows of vanished pods failed'))
            .finally(nudgeStalled);
        },
        (err) => log.error({ err }, 'watch cache failed to start'),
      );
    } else registerNodes();
    log.info({ url: http.url, httpsUrl, extenderUrl: extender.url }, 'control plane listening');
    return {
      url: http.url,
      ...(httpsUrl ? { httpsUrl } : {}),
      extenderUrl: extender.url,
      ...(extender.client ? { extenderClient: extender.client } : {}),
      app,
      state,
      jwks: signingKeys.jwks,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

const NO_KEYS: jose.JSONWebKeySet = { keys: [] };

/** Counts, logs and records an Event for each pod whose assignment holds nothing. */
function unverifiedReporter(
  registry: Registry,
  log: Logger,
  recordEvent: (u: UnverifiedAssignment) => Promise<void>,
): (u: UnverifiedAssignment) => void {
  const metrics = createAssignmentTrustMetrics(registry);
  return (u) => {
    metrics.unverified.inc({ reason: u.reason });
    log.warn({ pod: `${u.pod.namespace}/${u.pod.name}`, reason: u.reason, detail: u.message }, 'unverified assignment');
    recordEvent(u).catch((err) => log.warn({ err }, 'event not recorded'));
  };
}

/** The Warning Event on a pod whose assignment annotation holds nothing. */
async function recordUnverified(
  kube: ControlPlaneKube,
  u: UnverifiedAssignment,
  instanceId: string,
  clock: () => Date,
): Promise<void> {
  const now = clock();
  const message = `assignment ignored (${u.reason}): ${u.message}; it holds no GPU capacity`;
  await kube.createEvent(
    u.pod.namespace,
    podEvent(u.pod, eventReasons.assignmentUnverified, message, {
      type: 'Warning',
      component: 'vcuda-control-plane',
      host: instanceId,
      now,
      nameSuffix: `${now.getTime().toString(36)}.${instanceId}.${Math.floor(performance.now())}`,
    }),
  );
}

/** The webhook's certificate keeper, or none when the webhooks are not served (no cluster, no files). */
function createKeeper(
  config: ControlPlaneConfig,
  webhook: ReturnType<typeof webhookConfigSchema.parse>,
  names: ReturnType<typeof resourceNames>,
  kc: KubeConfig | undefined,
  clock: () => Date,
  log: Logger,
  onCertificate: (cert: ServingCertificate) => void,
): WebhookKeeper | undefined {
  if (config.httpsPort === 0) return undefined;
  const c = webhook.certificates;
  const fromFiles = c.mode === 'files' && Boolean(c.certFile && c.keyFile);
  if (!fromFiles && !kc) {
    log.info('no cluster and no certificate files: the admission webhooks are not served');
    return undefined;
  }
  return createWebhookKeeper({
    config: webhook,
    names,
    secretStore: !fromFiles && kc ? kubeCertificateSecretStore(kc, c.secretNamespace, c.secretName) : undefined,
    readFile: (path) => readFileSync(path, 'utf8'),
    registrationClient: kc && config.webhookRegistration === 'auto' ? kubeWebhookConfigurationClient(kc) : undefined,
    clock,
    logger: { info: (o, m) => log.info(o, m), warn: (o, m) => log.warn(o, m) },
    onCertificate,
  });
}

/**
 * The scheduler extender's own HTTPS listener, which demands a client certificate from the CAs
 * the keeper trusts, and keeps its TLS current. Serves only `/scheduler/...`.
 */
async function serveExtender(
  config: ControlPlaneConfig,
  webhook: ReturnType<typeof webhookConfigSchema.parse>,
  scheduler: Hono,
  kc: KubeConfig | undefined,
  clock: () => Date,
  log: Logger,
): Promise<{ url: string; client?: ExtenderClientCredentials; close: () => Promise<void> }> {
  const certificates = config.extender.certificates;
  const service = { name: webhook.registration.serviceName, namespace: webhook.registration.serviceNamespace };
  let listening: Listening | undefined;
  const keeper = createExtenderTlsKeeper({
    config: certificates,
    clientName: config.extender.allowedClients[0] as string,
    // Without a cluster the callers are on this machine.
    serving:
      certificates.mode === 'ephemeral'
        ? { dnsNames: [...serviceDnsNames(service), 'localhost'], ipAddresses: ['127.0.0.1'] }
        : { dnsNames: serviceDnsNames(service), ipAddresses: [] },
    store:
      certificates.mode === 'self' && kc
        ? kubePemSecretStore(kc, config.namespace, certificates.secretName, EXTENDER_SECRET_KEYS)
        : undefined,
    readFile: (path) => readFileSync(path, 'utf8'),
    clock,
    logger: { info: (o, m) => log.info(o, m), warn: (o, m) => log.warn(o, m) },
    onTls: (tls) => listening?.setCertificate(tls),
  });
  const { tls, client } = await keeper.refresh();
  const app = new Hono().route('/scheduler', scheduler);
  listening = await listen(app, config.host, config.extender.port, tls);
  const stop = keeper.start(WEBHOOK_REFRESH_MS);
  const served = listening;
  return {
    url: served.url,
    ...(client ? { client } : {}),
    close: async () => {
      stop();
      await served.close();
    },
  };
}
