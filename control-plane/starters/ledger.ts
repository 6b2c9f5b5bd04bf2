/**
 * The quota ledger and what keeps it true: the database (migrated), the capacity follower that
 * releases an ended pod's rows at once, and the periodic housekeeping behind it.
 */
import { randomUUID } from 'node:crypto';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { createLedgerProbe, type LedgerProbe } from '../../db/ledger-probe.js';
import { migrate } from '../../db/migrate.js';
import { createUsageStore } from '../../db/usage.js';
import { createClaimLedger } from '../claim-ledger/claim-ledger.js';
import { kubeClaimLister, reconcileClaimsOnce } from '../claim-ledger/claim-reconcile.js';
import type { ClusterState } from '../cluster-state.js';
import type { BindLedger } from '../extender/binder.js';
import type { ExtenderMetrics } from '../extender/extender-metrics.js';
import { withLedgerDeadlines } from '../extender/ledger-deadlines.js';
import { LedgerNodes } from '../extender/ledger-nodes.js';
import { reconcileLedger } from '../extender/ledger-reconciler.js';
import { Nudger } from '../extender/nudger.js';
import { PendingReleases } from '../extender/pending-releases.js';
import { PodWriteBatcher } from '../extender/pod-write-batcher.js';
import type { ControlPlaneKube } from '../kube-client.js';
import type { WatchCache } from '../watch-cache.js';
import type { ClusterView } from './cluster.js';
import { type Closer, every, type StartContext } from './context.js';

const HOUSEKEEPING_MS = 15_000;
const RECONCILE_MS = 60_000;
/**
 * A claim charge younger than this is never released by the reconcile: the hook admitted its write,
 * which may not be stored yet when the claims are listed (and the replicas' clocks may disagree).
 * A charge whose write was refused after all is held this much longer: counting too much, never
 * too little.
 */
const CLAIM_WRITE_GRACE_MS = 30_000;
const DOWNSAMPLE_MS = 3_600_000;
/**
 * The watch cache may not have seen a pod yet that another replica is binding right now; only rows
 * reserved at least this long before a reconcile can be judged by the cache's pod list.
 */
const RECONCILE_GRACE_MS = 30_000;
/** How long one readiness probe of the ledger answers for every /readyz in between. */
const READINESS_CACHE_MS = 2000;

export type LedgerStore = {
  db: VcudaDb;
  /** This process's name in the ledger: the owner of the holds it reserves, and of its lease. */
  replica: string;
  ledger: Ledger;
  /** What bind and node registration call: every call with a deadline (a late reservation is released). */
  boundedLedger: BindLedger;
  probe: LedgerProbe;
  close: Closer;
};

/** The database, migrated before anything uses it; a given database is left open on close. */
export async function startLedgerStore({ config, clock, log }: StartContext, given?: VcudaDb): Promise<LedgerStore> {
  const db = given ?? (await connectDb(config.database));
  const close: Closer = given ? () => undefined : () => closeDb(db);
  try {
    await migrate(db);
  } catch (err) {
    await close();
    throw err;
  }
  // Per process, not per replica name: a restarted replica must not pass for the one that died.
  const replica = `${config.instanceId}-${randomUUID().slice(0, 8)}`;
  const ledger = createLedger(db, { clock, replica });
  const boundedLedger = withLedgerDeadlines(ledger, {
    timeoutMs: config.database.callTimeoutMs,
    onLateReservation: (podUid, err) =>
      err
        ? log.warn({ podUid, err }, 'a reservation landed after its bind failed; its release failed, expiry frees it')
        : log.info({ podUid }, 'a reservation landed after its bind failed; released'),
  });
  const probe = createLedgerProbe(db, { timeoutMs: config.database.callTimeoutMs, cacheMs: READINESS_CACHE_MS });
  return { db, replica, ledger, boundedLedger, probe, close };
}

/**
 * No stalls, and the ledger follows the pods: an ended pod's rows are released at once, and pods
 * refused for lack of room are nudged when capacity frees up.
 */
export function followCapacity(
  { config, clock, log }: StartContext,
  deps: { ledger: Ledger; state: ClusterState; kube: ControlPlaneKube; metrics: ExtenderMetrics },
): { nudger: Nudger; close: Closer } {
  const { ledger, kube } = deps;
  const nudger = new Nudger({
    clock,
    patch: async (t, annotations) => {
      await kube.patchPodAnnotations(t.namespace, t.name, annotations);
    },
    onNudged: () => deps.metrics.nudges.inc(),
    onError: (t, err) => log.debug({ pod: `${t.namespace}/${t.name}`, err }, 'nudge failed'),
  });
  // An allocated pod's container sizes stop being pending on its node, in the ledger that every
  // replica's binds consult; allocations arriving together are written together.
  const allocationMarks = new PodWriteBatcher(async (uids) => {
    await ledger.markAllocated(config.clusterName, uids);
    return { missing: [] };
  });
  // A release the ledger could not take (it was unreachable) is tried again within seconds.
  const releases = new PendingReleases((uid) => ledger.release(config.clusterName, uid), {
    onError: (podUid, err, attempt) => {
      if (attempt === 1) log.warn({ err, podUid }, 'release failed; trying again until the ledger takes it');
    },
  });
  const unsubscribe = deps.state.onCapacityFreed((e) => {
    if (e.why === 'pod-ended' && e.pod?.uid) {
      nudger.forget(e.pod.uid);
      releases.add(e.pod.uid);
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
  return {
    nudger,
    close: () => {
      unsubscribe();
      releases.close();
      return nudger.close();
    },
  };
}

export type LedgerHousekeeping = {
  ledgerNodes: LedgerNodes;
  /** Registers every watched node's cards in the ledger, once the watch has synced. */
  registerNodes: () => void;
  close: Closer;
};

/**
 * The ledger learns every watched node's cards in the background, so first binds do not wait for
 * it; with a watch, the ledger is reconciled with the cluster (its unconfirmed holds are settled
 * by ledger-follow.ts).
 */
export function startLedgerHousekeeping(
  ctx: StartContext,
  deps: { store: LedgerStore; state: ClusterState; watch: WatchCache | undefined },
): LedgerHousekeeping {
  const { config, log } = ctx;
  const { store, watch } = deps;
  const ledgerNodes = new LedgerNodes(store.boundedLedger, config.clusterName);
  const registerNodes = () => {
    if (watch && !watch.isSynced()) return;
    ledgerNodes
      .ensureAll(deps.state.snapshot().nodes.values())
      .then(
        (r) =>
          r.failed > 0 && log.warn({ failed: r.failed, err: r.firstError }, 'registering nodes in the ledger failed'),
      )
      .catch((err) => log.warn({ err }, 'registering nodes in the ledger failed'));
  };
  const stopHousekeeping = every(HOUSEKEEPING_MS, registerNodes);
  const stopReconcile = watch ? every(RECONCILE_MS, () => reconcileOnce(ctx, deps, ledgerNodes)) : undefined;
  return {
    ledgerNodes,
    registerNodes,
    close: () => {
      stopReconcile?.();
      stopHousekeeping();
    },
  };
}

function reconcileOnce(
  { config, clock, log }: StartContext,
  deps: { store: LedgerStore; state: ClusterState; watch: WatchCache | undefined },
  ledgerNodes: LedgerNodes,
): void {
  if (!deps.watch?.isSynced()) return;
  reconcileLedger({
    cluster: config.clusterName,
    ledger: deps.store.ledger,
    state: deps.state,
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
}

/**
 * DRA claims' charges repaired from the claims' status every reconcile period (a cluster that
 * does not serve resource.k8s.io/v1 is told once and left alone).
 */
export function startClaimReconcile(
  { config, clock, log }: StartContext,
  deps: { store: LedgerStore; cluster: Pick<ClusterView, 'kc' | 'state'>; driver: string },
): Closer {
  const { kc, state } = deps.cluster;
  if (!kc) return () => undefined;
  const claims = createClaimLedger({
    ledger: deps.store.ledger,
    cluster: config.clusterName,
    driver: deps.driver,
    partitionNode: (node) => state.snapshot().nodes.get(node),
  });
  const list = kubeClaimLister(kc);
  let served = true;
  const notServed = () => {
    if (served) log.info('resource.k8s.io/v1 is not served: no claims to reconcile');
    served = false;
  };
  return every(RECONCILE_MS, () => {
    reconcileClaimsOnce({ list, claims, now: clock, skewMs: CLAIM_WRITE_GRACE_MS, log, notServed }).catch((err) =>
      log.warn({ err }, 'claims reconcile failed'),
    );
  });
}

/** The usage store; raw usage samples become hourly, then daily rows, so the table does not grow without bound. */
export function startUsageStore(
  { clock, log }: StartContext,
  db: VcudaDb,
): { usage: ReturnType<typeof createUsageStore>; close: Closer } {
  const usage = createUsageStore(db, { clock });
  const close = every(DOWNSAMPLE_MS, () => {
    usage.downsampleUsage().catch((err) => log.warn({ err }, 'usage downsampling failed'));
  });
  return { usage, close };
}
