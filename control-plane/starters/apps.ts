/**
 * The composed hono apps: the admission reviews, the scheduler extender's verbs behind their
 * client-certificate gate, and the plain-HTTP app (dashboard, reports, usage, metrics, health).
 */
import { readFileSync } from 'node:fs';
import type { HttpBindings } from '@hono/node-server';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Hono, MiddlewareHandler } from 'hono';
import type { Registry } from 'prom-client';
import { DEFAULT_DRA_DRIVER, VcudaError } from '../../contract/index.js';
import { createReportRunner } from '../../db/reports.js';
import type { createUsageStore } from '../../db/usage.js';
import { type AdmissionListener, createAdmissionListener } from '../../webhooks/admission-handler.js';
import { createAdmissionMetrics } from '../../webhooks/admission-metrics.js';
import { type AdmissionRoutesDeps, admissionRoutes } from '../../webhooks/admission-routes.js';
import { type WebhookConfig, webhookConfigSchema } from '../../webhooks/config.js';
import { cachedQuotaPrecheck } from '../../webhooks/quota-precheck.js';
import { cachedAuthenticator, requireCaller, tokenReview } from '../api/caller-auth.js';
import { reportsRoutes } from '../api/reports-routes.js';
import { usageRoutes } from '../api/usage-routes.js';
import { grantsOf } from '../api/usage-writer.js';
import { apiRoutes, createApp } from '../app.js';
import { claimChargeRoute, createClaimChargeMetrics } from '../claim-ledger/claim-charge-route.js';
import { createClaimLedger } from '../claim-ledger/claim-ledger.js';
import { ensureClaimTemplatesWith, kubeClaimTemplateStore } from '../claim-templates.js';
import { createLedgerDashboardSource } from '../dashboard/ledger-source.js';
import { dashboardRoutes } from '../dashboard/routes.js';
import type { BindFaults, BindLease } from '../extender/binder.js';
import { guardedExtender } from '../extender/client-certificate.js';
import type { ExtenderMetrics } from '../extender/extender-metrics.js';
import type { LedgerNodes } from '../extender/ledger-nodes.js';
import type { Nudger } from '../extender/nudger.js';
import type { PodWriteBatcher } from '../extender/pod-write-batcher.js';
import { EXTENDER_COMPONENT, extenderRoutes } from '../extender/routes.js';
import { MIG_ONLY_REASON } from '../placement/cluster-snapshot.js';
import { createAssignmentSigner, type KeySet } from '../signing-keys.js';
import { type WebhookCallers, webhookCallers } from '../webhook-callers.js';
import type { ClusterView } from './cluster.js';
import type { StartContext } from './context.js';
import type { LedgerStore } from './ledger.js';

/**
 * How long admission reuses the ledger's "ok" for the same namespace and demand: replicas of a
 * workload are created together, and each would otherwise cost a query. Refusals are not reused.
 * Past it, the old "ok" answers while its refresh is in flight, for at most the pre-check's own
 * deadline: a review that waited that long for the ledger would be admitted without the pre-check.
 */
const PRECHECK_REUSE_MS = 1000;
/** How long a claim template known to exist is not asked for again (a deleted one is back within it). */
const TEMPLATE_REUSE_MS = 30_000;

/** The webhook settings, completed with what the control plane's own config already says. */
export function webhookConfigOf({ config }: StartContext): WebhookConfig {
  return webhookConfigSchema.parse({
    ...config.webhook,
    resourceDomain: config.resourceDomain,
    memoryUnitMiB: config.memoryUnitMiB,
    clusterName: config.clusterName,
  });
}

/** The admission reviews, as hono routes and as the HTTPS listener's fast path. */
export function admissionApps(
  { config, log }: StartContext,
  deps: { webhook: WebhookConfig; cluster: ClusterView; store: LedgerStore; registry: Registry },
): { routes: Hono; listener: AdmissionListener; callers: WebhookCallers } {
  const { webhook, cluster } = deps;
  // Who is the API server: its AdmissionConfiguration's client certificate or token.
  const callers = webhookCallers(webhook.callers, (path) => readFileSync(path, 'utf8'));
  const admissionDeps: AdmissionRoutesDeps = {
    names: cluster.names,
    memoryUnitMiB: config.memoryUnitMiB,
    clusterName: config.clusterName,
    schedulerName: webhook.schedulerName,
    privilegedUsernames: webhook.privilegedUsernames,
    claims: webhook.claims,
    maxBodyBytes: webhook.maxBodyBytes,
    observer: createAdmissionMetrics(deps.registry),
    logger: { info: (o, m) => log.info(o, m), warn: (o, m) => log.warn(o, m) },
    precheckQuota: cachedQuotaPrecheck((q) => deps.store.ledger.precheckQuota(q), {
      ttlMs: PRECHECK_REUSE_MS,
      staleMs: config.database.callTimeoutMs,
    }),
    precheckTimeoutMs: config.database.callTimeoutMs,
    events: cluster.events.for('vcuda-webhook'),
    authenticateCaller: callers.check,
    draPods: draPodsOf({ config, log }, webhook, cluster),
  };
  const routes = admissionRoutes(admissionDeps);
  const driver = webhook.claims?.driverName ?? DEFAULT_DRA_DRIVER;
  routes.route(
    '/charge-claims',
    claimChargeRoute({
      claims: createClaimLedger({
        ledger: deps.store.ledger,
        cluster: config.clusterName,
        driver,
        partitionNode: (node) => cluster.state.snapshot().nodes.get(node),
      }),
      driver,
      maxBodyBytes: webhook.maxBodyBytes,
      timeoutMs: config.database.callTimeoutMs,
      authenticate: (c) => callers.check((c.env as Partial<HttpBindings> | undefined)?.incoming),
      logger: log,
      metrics: createClaimChargeMetrics(deps.registry),
    }),
  );
  // The HTTPS listener answers reviews without building web Request/Response objects.
  return { routes, listener: createAdmissionListener(admissionDeps), callers };
}

/** DRA mode for extender-style pods, when on and the cluster is reachable (templates are written there). */
export function draPodsOf(
  { log }: Pick<StartContext, 'config' | 'log'>,
  webhook: WebhookConfig,
  cluster: ClusterView,
): AdmissionRoutesDeps['draPods'] {
  if (!webhook.dra.convertPods) return undefined;
  if (!cluster.kc) {
    log.warn(
      'webhook.dra.convertPods needs a cluster connection (it writes ResourceClaimTemplates); pods are not converted',
    );
    return undefined;
  }
  const store = kubeClaimTemplateStore(cluster.kc);
  return {
    policy: {
      deviceClassName: webhook.claims.deviceClassName,
      driverName: webhook.claims.driverName,
      modeLabel: webhook.dra.modeLabel,
      modeValue: webhook.dra.modeValue,
    },
    ensureTemplates: ensureClaimTemplatesWith(store, { reuseMs: TEMPLATE_REUSE_MS }),
    timeoutMs: webhook.dra.templateTimeoutMs,
  };
}

/**
 * The extender verbs behind the client-certificate gate. Every listener mounts them there: only
 * the extender's own listener asks for a certificate, so elsewhere they answer 401 before reading a byte.
 */
export function schedulerApp(
  { config, clock, log }: StartContext,
  deps: {
    cluster: ClusterView;
    store: LedgerStore;
    keys: KeySet;
    metrics: ExtenderMetrics;
    nudger: Nudger;
    ledgerNodes: LedgerNodes;
    confirms: PodWriteBatcher;
    lease?: BindLease | undefined;
    faults?: BindFaults | undefined;
    ledgerRefused?: (() => void) | undefined;
  },
): Hono {
  const { cluster } = deps;
  const verbs = extenderRoutes({
    config: {
      cluster: config.clusterName,
      quantity: { names: cluster.names, memoryUnitMiB: config.memoryUnitMiB },
      defaultPlacement: config.placement.default,
      heartbeatStaleMs: config.heartbeatStaleSeconds * 1000,
      assignmentTtlMs: config.assignmentTtlSeconds * 1000,
      instanceId: config.instanceId,
      maxConcurrentCalls: config.extender.maxConcurrentCalls,
    },
    state: cluster.state,
    kube: cluster.kube,
    ledger: deps.store.boundedLedger,
    signer: createAssignmentSigner(deps.keys, config.assignmentTtlSeconds),
    clock,
    metrics: deps.metrics,
    nudger: deps.nudger,
    ledgerNodes: deps.ledgerNodes,
    confirms: deps.confirms,
    log: (msg, fields) => log.info(fields ?? {}, msg),
    ...(deps.lease ? { lease: deps.lease } : {}),
    ...(deps.faults ? { faults: deps.faults } : {}),
    ...(deps.ledgerRefused ? { ledgerRefused: deps.ledgerRefused } : {}),
    events: cluster.events.for(EXTENDER_COMPONENT),
  });
  return guardedExtender(verbs, {
    allowedClients: config.extender.allowedClients,
    maxBodyBytes: config.extender.maxBodyBytes,
    // A certificate of the trusted CA naming someone else is worth a look; anonymous knocks are not.
    onRefused: (r) => (r.status === 403 ? log.warn(r, 'extender call refused') : log.debug(r, 'extender call refused')),
  });
}

/** Usage samples feed chargeback: only the node agents write them, proven by a reviewed token. */
function usageGuardOf({ config }: StartContext, kc: KubeConfig | undefined): MiddlewareHandler | undefined {
  if (config.api.auth !== 'tokenreview') return undefined;
  if (!kc) throw new VcudaError('invalid', 'api.auth "tokenreview" needs a cluster connection to review tokens');
  const review = tokenReview(kc, config.api.tokenAudiences);
  return requireCaller(cachedAuthenticator(review), config.api.usageWriters, 'POST /api/v1/usage');
}

/**
 * The plain-HTTP port: only what may be public (dashboard, reports, metrics, health) and the
 * node agents' usage samples (token-reviewed); the extender verbs there answer 401.
 */
export function plainApp(
  ctx: StartContext,
  deps: {
    cluster: ClusterView;
    store: LedgerStore;
    usage: ReturnType<typeof createUsageStore>;
    registry: Registry;
    scheduler: Hono;
  },
): Hono {
  const { config, clock, log } = ctx;
  const { cluster, store, registry } = deps;
  const { state, watch } = cluster;
  const reports = createReportRunner(store.db, { clock });
  const usageGuard = usageGuardOf(ctx, cluster.kc);
  return createApp({
    scheduler: deps.scheduler,
    api: apiRoutes(
      reportsRoutes({ reports, idleDefaults: { idleForMinutes: config.dashboard.idleForMinutes } }),
      usageRoutes({
        clusterName: config.clusterName,
        usage: deps.usage,
        ...(usageGuard ? { guard: usageGuard } : {}),
        // A node agent reports only pods assigned to its node, on their granted cards.
        pods: (namespace, name) => state.pod(namespace, name),
        grants: (pod) =>
          grantsOf(state.heldAssignment(pod.metadata?.namespace ?? '', pod.metadata?.name ?? ''), pod.metadata?.uid),
        // And only claims the ledger charged on its node, on the cards of their shares.
        claims: (holders) => store.ledger.claimShares(config.clusterName, holders),
        clock,
        samplePeriodS: config.api.usageSamplePeriodSeconds,
        // A node's batch is thousands of rows: more than one ledger call's time, less than the agent's 5 s.
        writeTimeoutMs: Math.min(4 * config.database.callTimeoutMs, 4000),
      }),
    ),
    dashboard: dashboardRoutes({
      source: createLedgerDashboardSource({
        db: store.db,
        idleForMinutes: config.dashboard.idleForMinutes,
        reports,
        clock,
        readRefusals: (n) => cluster.refusals.readRefusals(n),
        readPreemptions: (n) => cluster.preemptions.readPreemptions(n),
        readUnplacedPods: () => cluster.state.unplacedPods().map((p) => ({ cluster: config.clusterName, ...p })),
        readLiveNodes: () => liveNodes(ctx, cluster),
      }),
      clock,
      maxStreams: config.dashboard.maxStreams,
      maxStreamsPerClient: config.dashboard.maxStreamsPerClient,
    }),
    metrics: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
    readiness: async () => {
      if (watch && !watch.isSynced()) return { ready: false, reason: 'watch cache not synced yet' };
      const ledgerReached = await store.probe.check();
      return ledgerReached.ok ? { ready: true } : { ready: false, reason: ledgerReached.reason };
    },
    log: { error: (fields, message) => log.error(fields, message) },
    apiMaxBodyBytes: config.api.maxBodyBytes,
  });
}

/**
 * Idle nodes (not in the ledger before their first bind), card health, and whether each node's
 * agent still reports (judged by the limit the extender's filter uses), from the watch cache.
 */
function liveNodes({ config, clock }: StartContext, cluster: ClusterView) {
  const nowMs = clock().getTime();
  const limitMs = config.heartbeatStaleSeconds * 1000;
  return [...cluster.state.snapshot().nodes.values()].map((n) => ({
    cluster: config.clusterName,
    node: n.name,
    cards: [
      ...n.cards.map(({ uuid, index, model, memoryMiB, healthy, healthReason, memoryBurst, sharedMig }) => {
        // A card in MIG mode is not offered whole: its own health is what the reason hides.
        const migMode = healthReason === MIG_ONLY_REASON;
        return {
          ...{ uuid, index, model, memoryMiB, healthy: healthy || migMode },
          ...(memoryBurst === undefined ? {} : { memoryBurst }),
          ...(migMode ? { migMode } : {}),
          // A shared instance is part of its parent card, like a whole one: never a card beside it.
          ...(sharedMig
            ? {
                mig: {
                  ...{ parent: sharedMig.parentUuid, profile: sharedMig.profile },
                  ...{ start: sharedMig.start, size: sharedMig.size, isShared: true },
                },
              }
            : {}),
        };
      }),
      ...n.migInstances.map((m) => ({
        uuid: m.uuid,
        index: m.parentIndex,
        model: `${m.model} MIG ${m.profile}`,
        memoryMiB: m.memoryMiB,
        healthy: m.healthy,
        mig: { parent: m.parentUuid, profile: m.profile, start: m.start, size: m.size },
      })),
    ],
    agent: {
      reporting: n.heartbeatMs > 0 && nowMs - n.heartbeatMs <= limitMs,
      lastHeartbeat: n.heartbeatMs > 0 ? new Date(n.heartbeatMs).toISOString() : null,
      limitSeconds: config.heartbeatStaleSeconds,
    },
  }));
}
