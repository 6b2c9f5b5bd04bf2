/**
 * Starts one control-plane process from its config: database (migrated), Kubernetes connection,
 * signing keys, watch cache, ledger housekeeping, and the HTTP(S) servers of the composed app.
 * A plain function returning `{ url, close }`, so `vcuda local` and tests run it in-process.
 *
 * Each step is a starter in `starters/` that owns one resource and hands back its closer; the
 * order below is the start order, and `close` stops them in reverse.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Hono } from 'hono';
import type * as jose from 'jose';
import { type Logger, pino } from 'pino';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { redactingLogHooks } from '../contract/redact.js';
import type { VcudaDb } from '../db/connect.js';
import type { ClusterState } from './cluster-state.js';
import type { ControlPlaneConfig } from './config.js';
import type { BindFaults } from './extender/binder.js';
import { createExtenderMetrics } from './extender/extender-metrics.js';
import type { ExtenderClientCredentials } from './extender/extender-tls.js';
import { PodWriteBatcher } from './extender/pod-write-batcher.js';
import type { KeySet } from './signing-keys.js';
import { admissionApps, plainApp, schedulerApp, webhookConfigOf } from './starters/apps.js';
import { connectCluster, startSigningKeys } from './starters/cluster.js';
import { closerStack, type StartContext } from './starters/context.js';
import { followPods, watchRefusals } from './starters/follow.js';
import { listen } from './starters/http-listener.js';
import {
  followCapacity,
  startClaimReconcile,
  startLedgerHousekeeping,
  startLedgerStore,
  startUsageStore,
} from './starters/ledger.js';
import { followLedgerHolds, startReplicaLease } from './starters/ledger-follow.js';
import { serveExtender, serveWebhooks } from './starters/tls-listeners.js';

export type ControlPlaneOverrides = {
  /** Use this database (left open on close) instead of connecting from config. */
  db?: VcudaDb;
  /** Use this cluster connection instead of the one config describes. */
  kubeConfig?: KubeConfig;
  keys?: KeySet;
  clock?: () => Date;
  logger?: Logger;
  /**
   * The webhooks' HTTPS port when they are served, 0 for any free one (reported in `httpsUrl`):
   * config's `httpsPort` cannot say so, its 0 turns the webhooks off.
   */
  httpsPort?: number;
  /** Fault injection for tests: called at each step of every bind (extender/binder.ts). */
  bindFaults?: BindFaults;
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

export async function startControlPlane(
  config: ControlPlaneConfig,
  overrides: ControlPlaneOverrides = {},
): Promise<RunningControlPlane> {
  const clock = overrides.clock ?? (() => new Date());
  const log =
    overrides.logger ?? pino({ level: config.logLevel, name: 'vcuda-control-plane', hooks: redactingLogHooks });
  const ctx: StartContext = { config, clock, log };
  const closers = closerStack(log);
  try {
    // 1. Database, migrated before anything uses it.
    const store = await startLedgerStore(ctx, overrides.db);
    closers.push(store.close);
    // 2. Metrics, cluster connection and view. Assignments count only once verified against the
    // keys loaded in step 3; nothing is judged before (the watch starts last).
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'vcuda_control_plane_' });
    const cluster = connectCluster(ctx, registry, overrides.kubeConfig);
    // 3. Signing keys shared by every replica; the public half where node agents read it.
    const keys = await startSigningKeys(ctx, cluster, overrides.keys);
    // 4. Metrics.
    const metrics = createExtenderMetrics(registry);
    registerViewGauge(registry, cluster.state);
    // 5. No stalls, and the ledger follows the pods: an ended pod's rows are released at once.
    const capacity = followCapacity(ctx, { ledger: store.ledger, state: cluster.state, kube: cluster.kube, metrics });
    closers.push(capacity.close);
    const housekeeping = startLedgerHousekeeping(ctx, { store, state: cluster.state, watch: cluster.watch });
    closers.push(housekeeping.close);
    // This replica's lease, and the other replicas' holds counted and, once left behind, settled.
    const lease = await startReplicaLease(ctx, { ledger: store.ledger, replica: store.replica });
    closers.push(lease.close);
    const holds = followLedgerHolds(ctx, { ledger: store.ledger, cluster, replica: store.replica });
    closers.push(holds.close);
    // 6. The composed apps.
    const webhook = webhookConfigOf(ctx);
    const admission = admissionApps(ctx, { webhook, cluster, store, registry });
    closers.push(startClaimReconcile(ctx, { store, cluster, driver: webhook.claims.driverName }));
    closers.push(() => cluster.events.close());
    const { nudger } = capacity;
    const { ledgerNodes, registerNodes } = housekeeping;
    // Binds answer before their confirm commits: the confirms still queued are waited for at
    // shutdown, once every listener has closed and before the ledger does.
    const confirms = new PodWriteBatcher((uids) => store.boundedLedger.confirmMany(config.clusterName, uids));
    closers.push(() => confirms.drain());
    const scheduler = schedulerApp(ctx, {
      cluster,
      store,
      keys,
      metrics,
      nudger,
      ledgerNodes,
      confirms,
      lease,
      faults: overrides.bindFaults,
      ledgerRefused: holds.readNow,
    });
    const usage = startUsageStore(ctx, store.db);
    closers.push(usage.close);
    const app = plainApp(ctx, { cluster, store, usage: usage.usage, registry, scheduler });
    // 7. Serve; then follow the cluster (readiness waits for the first full list).
    const http = await listen(app, config.host, config.port);
    closers.push(http.close);
    const https = await serveWebhooks(ctx, { webhook, cluster, admission, port: overrides.httpsPort });
    closers.push(https.close);
    const extender = await serveExtender(ctx, { webhook, scheduler, kc: cluster.kc });
    closers.push(extender.close);
    closers.push(watchRefusals(ctx, cluster));
    const { schedulerName } = webhook;
    closers.push(followPods(ctx, { cluster, ledger: store.ledger, nudger, schedulerName, registerNodes }));
    log.info({ url: http.url, httpsUrl: https.url, extenderUrl: extender.url }, 'control plane listening');
    return running({ http, https, extender }, { app, state: cluster.state, jwks: keys.jwks, close: closers.close });
  } catch (err) {
    await closers.close();
    throw err;
  }
}

/** What a started control plane hands back: its listeners' URLs and what runs behind them. */
function running(
  listeners: {
    http: { url: string };
    https: { url?: string };
    extender: { url: string; client?: ExtenderClientCredentials };
  },
  rest: Pick<RunningControlPlane, 'app' | 'state' | 'jwks' | 'close'>,
): RunningControlPlane {
  const { http, https, extender } = listeners;
  return {
    url: http.url,
    ...(https.url ? { httpsUrl: https.url } : {}),
    extenderUrl: extender.url,
    ...(extender.client ? { extenderClient: extender.client } : {}),
    ...rest,
  };
}

/** How many nodes the watch cache holds, read at each scrape. */
function registerViewGauge(registry: Registry, state: ClusterState): void {
  new Gauge({
    name: 'vcuda_watch_cache_nodes',
    help: 'Nodes in the control plane view',
    registers: [registry],
    collect() {
      this.set(state.snapshot().nodes.size);
    },
  });
}
