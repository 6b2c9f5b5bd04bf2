/**
 * The simulated kube-controller-manager: the Deployment, ReplicaSet and Job controllers, the
 * resourceclaim controller (where the API server serves DRA) and the garbage collector over one
 * informer cache. Any change wakes one pass over every workload (the
 * simulator's clusters are small); a workload whose sync failed (a pod refused by admission, a
 * conflict) waits out a doubling backoff from 5 ms to 1000 s, as client-go's default controller
 * rate limiter makes it. A first retry of 1 s left a Deployment whose status write lost a race
 * with its own scale 1, 2, then 4 s behind, where kube-controller-manager retries at once.
 */
import type { KubeClient, KubeObj } from '../kube-client.js';
import { collectGarbage } from './garbage-collector.js';
import { DRA_KINDS, InformerCache, WORKLOAD_KINDS } from './informer-cache.js';
import { syncClaim, syncPodClaims } from './resource-claim-sync.js';
import { uidOf } from './workload-objects.js';
import { type SyncContext, syncDeployment, syncJob, syncReplicaSet } from './workload-syncs.js';

export type ControllerManagerOptions = {
  client: KubeClient;
  now?: () => number;
  /** Where a failed sync is reported (the controllers retry it). */
  onError?: (message: string) => void;
  /** Run the resourceclaim controller (the API server must serve `resource.k8s.io/v1`). */
  dynamicResources?: boolean;
};

export type SimControllerManager = { close(): Promise<void> };

const FIRST_BACKOFF_MS = 5;
const MAX_BACKOFF_MS = 1_000_000;
/** Changes arriving together (a pod's status, its owner's status) make one pass. */
const BATCH_MS = 10;

type Backoff = { until: number; delayMs: number };

export function startControllerManager(opts: ControllerManagerOptions): SimControllerManager {
  const now = opts.now ?? Date.now;
  const abort = new AbortController();
  const backoffs = new Map<string, Backoff>();
  const timers = new Set<NodeJS.Timeout>();
  let running: Promise<void> | undefined;
  let again = false;
  let pending: NodeJS.Timeout | undefined;

  const wake = (afterMs = BATCH_MS) => {
    if (abort.signal.aborted || (afterMs === BATCH_MS && pending)) return;
    const t = setTimeout(() => {
      timers.delete(t);
      if (t === pending) pending = undefined;
      run();
    }, afterMs);
    timers.add(t);
    if (afterMs === BATCH_MS) pending = t;
  };
  const cache = new InformerCache(
    () => wake(),
    opts.dynamicResources ? [...WORKLOAD_KINDS, ...DRA_KINDS] : WORKLOAD_KINDS,
  );
  const ctx: SyncContext = { client: opts.client, cache, now };

  const run = () => {
    if (!cache.hasSynced()) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        await pass(ctx, backoffs, wake, opts.onError, opts.dynamicResources === true);
      } while (again && !abort.signal.aborted);
    })().finally(() => {
      running = undefined;
    });
  };

  cache.start(opts.client, abort.signal);
  return {
    close: async () => {
      abort.abort();
      for (const t of timers) clearTimeout(t);
      await running;
    },
  };
}

/** One sync of every Deployment, ReplicaSet and Job not backing off, then the garbage collector. */
async function pass(
  ctx: SyncContext,
  backoffs: Map<string, Backoff>,
  wake: (afterMs?: number) => void,
  onError: ((message: string) => void) | undefined,
  dynamicResources: boolean,
): Promise<void> {
  const sync = async (obj: KubeObj, what: string, fn: () => Promise<void>) => {
    const uid = uidOf(obj);
    const backoff = backoffs.get(uid);
    if (backoff && backoff.until > ctx.now()) return;
    try {
      await fn();
      backoffs.delete(uid);
    } catch (e) {
      const delayMs = Math.min(MAX_BACKOFF_MS, backoff ? backoff.delayMs * 2 : FIRST_BACKOFF_MS);
      backoffs.set(uid, { until: ctx.now() + delayMs, delayMs });
      wake(delayMs);
      onError?.(`${what} ${obj.metadata.namespace}/${obj.metadata.name}: ${(e as Error).message}`);
    }
  };
  const replicaSets = ctx.cache.byNamespace('replicasets');
  for (const d of ctx.cache.list('deployments')) {
    await sync(d, 'deployment', () => syncDeployment(ctx, d, replicaSets.get(d.metadata.namespace ?? 'default') ?? []));
  }
  let pods = ctx.cache.byNamespace('pods');
  for (const rs of ctx.cache.list('replicasets')) {
    await sync(rs, 'replicaset', () => syncReplicaSet(ctx, rs, pods.get(rs.metadata.namespace ?? 'default') ?? []));
    pods = ctx.cache.byNamespace('pods');
  }
  for (const job of ctx.cache.list('jobs')) {
    await sync(job, 'job', () => syncJob(ctx, job, pods.get(job.metadata.namespace ?? 'default') ?? []));
    pods = ctx.cache.byNamespace('pods');
  }
  if (dynamicResources) {
    for (const pod of ctx.cache.list('pods')) await sync(pod, 'pod claims', () => syncPodClaims(ctx, pod));
    for (const claim of ctx.cache.list('resourceclaims'))
      await sync(claim, 'resourceclaim', () => syncClaim(ctx, claim));
  }
  await collectGarbage(ctx).catch((e: unknown) => onError?.(`garbage collector: ${(e as Error).message}`));
}
