/**
 * A kube-scheduler-like loop: watches nodes and pods, takes pending pods one at a time and runs
 * 1 basic filters, 2 extender filters, 3 prioritize, 4 pick the best node, 5 bind (through the
 * extender's bind verb when it manages the pod, else a Binding).
 *
 * Its queue behaves as kube-scheduler 1.32's does (checked against the binary): a pod that does
 * not fit gets a FailedScheduling event and `PodScheduled=False, reason Unschedulable` and is
 * parked until a cluster event (a node changing, an assigned pod changing or going, an update of
 * the pod itself, `nudge()`) or for 5 minutes at most; a pod whose attempt failed with an error
 * (extender unreachable, bind refused) is not parked. Either way it then waits out its backoff:
 * the initial backoff doubling per attempt up to the max (1 s and 10 s by default, or what the
 * configuration sets). No event shortens a backoff.
 *
 * `startScheduler` starts the watches (the cluster cache) and the loop; `close` stops them in
 * reverse order and waits for binds in flight.
 */
import { type KubeClient, type KubeObj, podPath } from '../kube-client.js';
import { DraCache } from './dra-cache.js';
import type { ClaimAllocation, ResourceClaim } from './dra-objects.js';
import { allocateOnNode, hasClaims, PreBindFailure, podClaims, watchDra, writeClaims } from './dra-plugin.js';
import { callBind, callFilter, callPrioritize, isInterested } from './extender-client.js';
import { ExtenderTransport } from './extender-transport.js';
import { filterNode, type SchedNode, type SchedPod, summarizeFailures } from './node-filters.js';
import { isResolvable, preempt } from './preemption.js';
import { ClusterCache, keyOf, SchedulingQueue } from './scheduler-cache.js';
import type { SchedulerConfig } from './scheduler-config.js';
import { schedulerEvent } from './scheduler-events.js';

export type SchedulerOptions = {
  client: KubeClient;
  config: SchedulerConfig;
  /** Scheduler names served besides the configuration's profiles (the sim runs one loop for all). */
  extraSchedulerNames?: string[];
  /** Override the configuration's podInitialBackoffSeconds / podMaxBackoffSeconds (tests). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** kube-scheduler's podMaxInUnschedulablePodsDuration (5 min). */
  maxParkedMs?: number;
  now?: () => number;
  log?: (msg: string) => void;
  /** Binds running at once (kube-scheduler binds asynchronously too). */
  maxInFlightBinds?: number;
  /** false: a fresh extender connection per call, so a Service spreads calls over replicas (tests). */
  extenderKeepAlive?: boolean;
  /**
   * Allocate pods' ResourceClaims as kube-scheduler 1.36's DynamicResources plugin does (the API
   * server must serve `resource.k8s.io/v1`).
   */
  dynamicResources?: boolean;
};

export type SchedulerStats = { attempts: number; bound: number; unschedulable: number; errors: number };

export type SimScheduler = {
  nudge(): void;
  stats(): SchedulerStats;
  close(): Promise<void>;
};

type Extender = SchedulerConfig['extenders'][number];
type Closer = () => void | Promise<void>;

/** The parts one scheduling cycle works with. */
type LoopContext = {
  client: KubeClient;
  config: SchedulerConfig;
  cache: ClusterCache;
  queue: SchedulingQueue;
  stats: SchedulerStats;
  schedulerName: string;
  ignored: Set<string>;
  now: () => number;
  log: (msg: string) => void;
  /** Wakes the loop early. */
  poke: () => void;
  /** Binds in flight; its size is what `maxInFlightBinds` bounds. */
  bindings: Set<Promise<void>>;
  /** The extenders' kept-alive connections. */
  transport: ExtenderTransport;
  /** Slices, classes and claims, when the scheduler allocates claims. */
  dra?: DraCache;
};

/** A pod's claims and, per feasible node, the allocations Filter decided there. */
type PodDra = { claims: ResourceClaim[]; byNode: Map<string, Map<string, ClaimAllocation>> };

/** The node and pod watches feed the cache; cluster events unpark waiting pods. */
function watchCluster(ctx: LoopContext, nudge: () => void): Closer {
  const { client, cache, queue } = ctx;
  const abort = new AbortController();
  const nodeHandlers = {
    onSync: (items: KubeObj[]) => {
      cache.syncNodes(items);
      nudge();
    },
    onEvent: (e: { type: string; object: KubeObj }) => {
      cache.nodeEvent(e.type, e.object);
      nudge();
    },
  };
  const podHandlers = {
    onSync: (items: KubeObj[]) => {
      cache.syncPods(items);
      ctx.poke();
    },
    onEvent: (e: { type: string; object: KubeObj }) => {
      if (e.type === 'DELETED') queue.forget(keyOf(e.object));
      const change = cache.podEvent(e.type, e.object);
      if (change === 'cluster') return nudge();
      if (change === 'pod-metadata') queue.unpark(keyOf(e.object));
      ctx.poke();
    },
  };
  void client.listWatch('/api/v1/nodes', '', nodeHandlers, abort.signal);
  void client.listWatch('/api/v1/pods', '', podHandlers, abort.signal);
  if (ctx.dra) watchDra(client, ctx.dra, nudge, abort.signal);
  return () => abort.abort();
}

/**
 * A failed attempt: backoff (parked when `unschedulable`), and unless the message repeats, a
 * FailedScheduling event and `PodScheduled=False` as kube-scheduler writes them.
 */
async function recordFailure(
  ctx: LoopContext,
  pod: KubeObj,
  message: string,
  kind: 'unschedulable' | 'error',
): Promise<void> {
  const t = ctx.now();
  if (!ctx.queue.fail(keyOf(pod), message, kind === 'unschedulable', t)) return;
  const { client } = ctx;
  const ns = pod.metadata.namespace ?? 'default';
  const time = new Date(t).toISOString();
  await schedulerEvent(ctx, pod, { reason: 'FailedScheduling', message, type: 'Warning', time });
  const reason = kind === 'unschedulable' ? 'Unschedulable' : 'SchedulerError';
  const condition = { type: 'PodScheduled', status: 'False', reason, message, lastTransitionTime: time };
  await client
    .strategicPatch(`${podPath(ns, pod.metadata.name)}/status`, { status: { conditions: [condition] } })
    .catch(() => undefined);
}

/** 1–2: the nodes that pass the basic filters and every interested extender's filter, and why the rest failed. */
async function feasibleNodes(ctx: LoopContext, pod: SchedPod, all: SchedNode[], dra: PodDra | undefined) {
  const reasons = new Map<string, string>();
  /** Failed nodes where evicting lower-priority pods could help (kube-scheduler's Unschedulable). */
  const resolvable = new Set<string>();
  // With the pods nominated to the node added, as kube-scheduler filters (addNominatedPods).
  const usedOnNode = (node: string) => {
    const used = ctx.cache.usedOnNode(node);
    for (const [k, v] of ctx.cache.nominatedOn(node, pod as unknown as KubeObj)) used.set(k, (used.get(k) ?? 0) + v);
    return used;
  };
  let feasible = all.filter((n) => {
    const why = filterNode(pod, n, { usedOnNode, ignoredResources: ctx.ignored }) ?? filterClaims(ctx, dra, n);
    if (why) reasons.set(n.metadata.name, why);
    if (why && isResolvable(why)) resolvable.add(n.metadata.name);
    return !why;
  });
  let binder: Extender | undefined;
  for (const ext of ctx.config.extenders) {
    if (!isInterested(ext, pod)) continue;
    if (ext.bindVerb) binder = ext;
    if (!ext.filterVerb || feasible.length === 0) continue;
    try {
      const out = await callFilter(ext, pod, feasible, ctx.transport);
      for (const [n, why] of out.failed) {
        reasons.set(n, why);
        if (!out.unresolvable.has(n)) resolvable.add(n);
      }
      const keep = new Set(out.nodeNames);
      feasible = feasible.filter((n) => keep.has(n.metadata.name));
    } catch (e) {
      if (ext.ignorable) continue;
      throw e;
    }
  }
  return { feasible, reasons, binder, resolvable };
}

/** The DynamicResources filter: the pod's claims allocated on `node` (kept for PreBind), or why not. */
function filterClaims(ctx: LoopContext, dra: PodDra | undefined, node: SchedNode): string | undefined {
  if (!ctx.dra || !dra?.claims.length) return undefined;
  const out = allocateOnNode(ctx.dra, dra.claims, node.metadata.name, new Date(ctx.now()));
  if (!out.ok) return out.reason;
  dra.byNode.set(node.metadata.name, out.allocations);
  return undefined;
}

/** 3–4: extender scores (scaled as kube-scheduler does), then a random pick among the best. */
async function pickNode(ctx: LoopContext, pod: SchedPod, feasible: SchedNode[]): Promise<string> {
  // kube-scheduler tries a pod's nominated node first (its victims were evicted for it).
  const nominated = (pod as { status?: { nominatedNodeName?: string } }).status?.nominatedNodeName;
  if (nominated && feasible.some((n) => n.metadata.name === nominated)) return nominated;
  const scores = new Map<string, number>(feasible.map((n) => [n.metadata.name, 0]));
  for (const ext of ctx.config.extenders) {
    if (!ext.prioritizeVerb || !isInterested(ext, pod) || feasible.length < 2) continue;
    for (const [host, s] of await callPrioritize(ext, pod, feasible, ctx.transport)) {
      // kube-scheduler scales extender scores to its 0..100 range: score x weight x 100/10.
      if (scores.has(host)) scores.set(host, scores.get(host)! + s * ext.weight * 10);
    }
  }
  const best = Math.max(...feasible.map((n) => scores.get(n.metadata.name)!));
  const top = feasible.filter((n) => scores.get(n.metadata.name) === best);
  return top[Math.floor(Math.random() * top.length)]!.metadata.name;
}

/**
 * 5. PreBind (the pod's claims) and bind in the background, as kube-scheduler's binding cycle does:
 * the pod is assumed on its node meanwhile, so the next cycles count it; a failure un-assumes it and retries.
 */
function bindInBackground(
  ctx: LoopContext,
  pod: KubeObj,
  chosen: string,
  binder: Extender | undefined,
  dra: PodDra | undefined,
): void {
  ctx.cache.assume(pod, chosen);
  const allocations = dra?.byNode.get(chosen) ?? new Map<string, ClaimAllocation>();
  for (const [key, allocation] of allocations) ctx.dra?.assume(key, allocation);
  const bind = async () => {
    if (dra?.claims.length) await writeClaims(ctx.client, dra.claims, allocations, pod);
    if (binder) return callBind(binder, pod as unknown as SchedPod, chosen, ctx.transport);
    await ctx.client.create(`${podPath(pod.metadata.namespace ?? 'default', pod.metadata.name)}/binding`, {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: pod.metadata.name, uid: pod.metadata.uid },
      target: { apiVersion: 'v1', kind: 'Node', name: chosen },
    });
  };
  const binding = bind().then(
    () => {
      ctx.stats.bound++;
      ctx.queue.forget(keyOf(pod));
      ctx.log(`bound ${keyOf(pod)} to ${chosen}`);
      // kube-scheduler's word for every pod it bound, through an extender's bind verb or not,
      // recorded in the background: the binding's slot is free already.
      const message = `Successfully assigned ${keyOf(pod)} to ${chosen}`;
      const time = new Date(ctx.now()).toISOString();
      void schedulerEvent(ctx, pod, { reason: 'Scheduled', message, type: 'Normal', time });
    },
    async (e: Error) => {
      ctx.cache.forget(pod);
      for (const key of allocations.keys()) ctx.dra?.forget(key);
      ctx.stats.errors++;
      // kube-scheduler words a failed PreBind by its plugin, a failed bind as rejected.
      const message = e instanceof PreBindFailure ? e.message : `binding rejected: ${e.message}`;
      await recordFailure(ctx, pod, message, 'error');
    },
  );
  ctx.bindings.add(binding);
  void binding.finally(() => {
    ctx.bindings.delete(binding);
    ctx.poke();
  });
}

/** One scheduling cycle for one pod; returns the node it is being bound to, or undefined. */
async function scheduleOne(ctx: LoopContext, pod: KubeObj): Promise<string | undefined> {
  ctx.stats.attempts++;
  const sp = pod as unknown as SchedPod;
  const all = [...ctx.cache.nodes.values()];
  const dra = ctx.dra && hasClaims(pod) ? podClaims(ctx.dra, pod) : undefined;
  if (dra && 'reason' in dra) {
    ctx.stats.unschedulable++;
    await recordFailure(ctx, pod, `0/${all.length} nodes are available: ${dra.reason}.`, 'unschedulable');
    return undefined;
  }
  const podDra = dra ? { claims: dra.claims, byNode: new Map() } : undefined;
  const { feasible, reasons, binder, resolvable } = await feasibleNodes(ctx, sp, all, podDra);
  if (feasible.length === 0) {
    ctx.stats.unschedulable++;
    const nominated = await preempt(ctx, pod, all, resolvable);
    const after = nominated ? ` preemption: evicting pods on ${nominated}` : '';
    await recordFailure(ctx, pod, summarizeFailures(all.length, reasons) + after, 'unschedulable');
    return undefined;
  }
  const chosen = await pickNode(ctx, sp, feasible);
  bindInBackground(ctx, pod, chosen, binder, podDra);
  return chosen;
}

/** The loop: each ready pending pod gets a cycle, then it sleeps until the next backoff ends or a poke. */
function runLoop(ctx: LoopContext, maxInFlightBinds: number): { poke: () => void; stop: () => Promise<void> } {
  let closed = false;
  let wake: (() => void) | undefined;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const cycle = async () => {
    const t = ctx.now();
    for (const pod of ctx.cache.pendingPods().filter((p) => ctx.queue.ready(keyOf(p), t))) {
      if (closed || ctx.bindings.size >= maxInFlightBinds) break;
      if (ctx.cache.isAssumed(pod)) continue;
      try {
        await scheduleOne(ctx, pod);
      } catch (e) {
        ctx.stats.errors++;
        await recordFailure(ctx, pod, (e as Error).message, 'error');
      }
    }
  };
  const done = (async () => {
    while (!closed) {
      await cycle();
      const waits = ctx.cache.pendingPods().map((p) => ctx.queue.waitOf(keyOf(p), ctx.now()));
      await sleep(waits.length ? Math.max(5, Math.min(...waits, 1000)) : 1000);
      wake = undefined;
    }
  })();
  return {
    poke: () => wake?.(),
    stop: async () => {
      closed = true;
      wake?.();
      await done;
      await Promise.allSettled([...ctx.bindings]);
    },
  };
}

export function startScheduler(opts: SchedulerOptions): SimScheduler {
  const { client, config } = opts;
  const schedulerNames = new Set([...config.schedulerNames, ...(opts.extraSchedulerNames ?? [])]);
  const queue = new SchedulingQueue({
    initialMs: opts.initialBackoffMs ?? config.backoff.initialMs,
    maxMs: opts.maxBackoffMs ?? config.backoff.maxMs,
    maxParkedMs: opts.maxParkedMs ?? 5 * 60_000,
  });
  let loop: { poke: () => void; stop: () => Promise<void> } | undefined;
  const ctx: LoopContext = {
    client,
    config,
    cache: new ClusterCache(schedulerNames),
    queue,
    stats: { attempts: 0, bound: 0, unschedulable: 0, errors: 0 },
    schedulerName: config.schedulerNames[0] ?? 'default-scheduler',
    ignored: new Set(
      config.extenders.flatMap((e) => e.managedResources.filter((r) => r.ignoredByScheduler).map((r) => r.name)),
    ),
    now: opts.now ?? Date.now,
    log: opts.log ?? (() => {}),
    poke: () => loop?.poke(),
    bindings: new Set(),
    transport: new ExtenderTransport({ keepAlive: opts.extenderKeepAlive ?? true }),
    ...(opts.dynamicResources ? { dra: new DraCache() } : {}),
  };
  /** A cluster event: every parked pod may fit now (after its backoff). */
  const nudge = () => {
    queue.unparkAll();
    ctx.poke();
  };
  const stopWatches = watchCluster(ctx, nudge);
  loop = runLoop(ctx, opts.maxInFlightBinds ?? 8);
  const running = loop;
  return {
    nudge,
    stats: () => ({ ...ctx.stats }),
    close: async () => {
      await stopWatches();
      await running.stop();
      ctx.transport.close();
    },
  };
}
