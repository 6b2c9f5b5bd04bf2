/**
 * Following the cluster, started last so everything that judges pods is in place: the refusal
 * events of every replica and node agent, and the pod watch with what runs once it has synced.
 */
import type { Ledger } from '../../db/ledger.js';
import { watchPreemptionEvents, watchRefusalEvents } from '../dashboard/refusal-events.js';
import type { Nudger } from '../extender/nudger.js';
import { stalledPods } from '../extender/stalled-pods.js';
import type { WatchCache } from '../watch-cache.js';
import type { ClusterView } from './cluster.js';
import { type Closer, every, type StartContext } from './context.js';

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

/**
 * Every replica lists every refusal of the cluster (the other replicas', the node agents'
 * VcudaAllocateFailed), not only its own. The log replaces a pod's row per reason, so this
 * replica's own events arriving twice (recorded at creation, then watched) show once.
 */
export function watchRefusals({ config, log }: StartContext, cluster: ClusterView): Closer {
  if (!cluster.kc) return () => undefined;
  const events = watchRefusalEvents(cluster.kc, cluster.refusals, {
    cluster: config.clusterName,
    onError: (err) => log.warn({ err }, 'refusal event watch failed; relisting'),
  });
  // Preemptions too: kube-scheduler's Preempted Events on victims reach no replica any other way.
  const preemptions = watchPreemptionEvents(cluster.kc, cluster.preemptions, {
    cluster: config.clusterName,
    onError: (err) => log.warn({ err }, 'preemption event watch failed; relisting'),
  });
  return () => {
    events.stop();
    preemptions.stop();
  };
}

export type PodFollowDeps = {
  cluster: ClusterView;
  ledger: Ledger;
  nudger: Nudger;
  schedulerName: string | undefined;
  /** Registers the watched nodes in the ledger; called once the cache has synced. */
  registerNodes: () => void;
};

/**
 * Starts the pod watch; once synced, registers nodes, releases the rows of pods gone while down,
 * and adopts the pods kube-scheduler holds as unschedulable. Without a cluster, registers at once.
 */
export function followPods(ctx: StartContext, deps: PodFollowDeps): Closer {
  const { clock, log } = ctx;
  const { watch, state } = deps.cluster;
  if (!watch) {
    deps.registerNodes();
    return () => undefined;
  }
  const nudgeStalled = stalledNudger(ctx, deps, watch);
  const stopResync = every(STALLED_RESYNC_MS, nudgeStalled);
  const listAskedAtMs = clock().getTime();
  watch.start().then(
    () => {
      log.info({ nodes: state.snapshot().nodes.size }, 'watch cache synced');
      deps.registerNodes();
      releaseVanished(ctx, deps, listAskedAtMs)
        .catch((err) => log.warn({ err }, 'releasing the rows of vanished pods failed'))
        .finally(nudgeStalled);
    },
    (err) => log.error({ err }, 'watch cache failed to start'),
  );
  return () => {
    stopResync();
    watch.stop();
  };
}

/**
 * kube-scheduler keeps pods refused before a restart or by a replica that died parked for up
 * to 5 minutes; this process's nudger never heard of them. Adopt them from the cache.
 */
function stalledNudger({ log }: StartContext, deps: PodFollowDeps, watch: WatchCache): () => void {
  const { state, names } = deps.cluster;
  return () => {
    if (!watch.isSynced()) return;
    const stalled = stalledPods(state.allPods(), { names, schedulerName: deps.schedulerName });
    if (stalled.length === 0) return;
    for (const t of stalled) deps.nudger.rememberRefused(t);
    log.info({ pods: stalled.length }, 'nudging pods kube-scheduler holds as unschedulable');
    deps.nudger.capacityFreed();
  };
}

/**
 * Pods that ended while this process was down never reported it: their rows would hold the
 * cards until the periodic reconcile. Every pod not finished counts as live here, pending
 * ones included, so a bind in flight on another replica keeps its rows.
 */
async function releaseVanished({ config, log }: StartContext, deps: PodFollowDeps, listAskedAtMs: number) {
  const live = [...deps.cluster.state.allPods()]
    .filter((p) => p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed')
    .map((p) => ({ uid: p.metadata?.uid ?? '', namespace: p.metadata?.namespace ?? '', name: p.metadata?.name ?? '' }));
  const { released } = await deps.ledger.reconcile(config.clusterName, live, {
    listedAt: new Date(listAskedAtMs - REPLICA_CLOCK_SKEW_MS),
  });
  if (released.length > 0) log.info({ released: released.length }, 'released the rows of pods gone while down');
}
