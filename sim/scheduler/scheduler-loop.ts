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
 */
import { randomBytes } from 'node:crypto';
import { type KubeClient, type KubeObj, podPath } from '../kube-client.js';
import { callBind, callFilter, callPrioritize, isInterested } from './extender-client.js';
import { filterNode, podRequests, type SchedNode, type SchedPod, summarizeFailures } from './node-filters.js';
import type { SchedulerConfig } from './scheduler-config.js';

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
};

export type SchedulerStats = { attempts: number; bound: number; unschedulable: number; errors: number };

export type SimScheduler = {
  nudge(): void;
  stats(): SchedulerStats;
  close(): Promise<void>;
};

/** A pod that failed an attempt: its backoff, and since when it is parked (unschedulable ones only). */
type QueueEntry = { attempts: number; notBefore: number; parkedSince?: number; lastMessage?: string };

const keyOf = (o: KubeObj) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

export function startScheduler(opts: SchedulerOptions): SimScheduler {
  const { client, config } = opts;
  const schedulerNames = new Set([...config.schedulerNames, ...(opts.extraSchedulerNames ?? [])]);
  const schedulerName = config.schedulerNames[0] ?? 'default-scheduler';
  const initialBackoff = opts.initialBackoffMs ?? config.backoff.initialMs;
  const maxBackoff = opts.maxBackoffMs ?? config.backoff.maxMs;
  const maxParked = opts.maxParkedMs ?? 5 * 60_000;
  const now = opts.now ?? Date.now;
  const nodes = new Map<string, SchedNode>();
  const pods = new Map<string, KubeObj>();
  /** Pods this loop bound whose binding the watch has not shown yet (kube-scheduler's "assumed" pods). */
  const assumed = new Map<string, string>();
  const queue = new Map<string, QueueEntry>();
  const stats: SchedulerStats = { attempts: 0, bound: 0, unschedulable: 0, errors: 0 };
  const ignored = new Set(
    config.extenders.flatMap((e) => e.managedResources.filter((r) => r.ignoredByScheduler).map((r) => r.name)),
  );
  const abort = new AbortController();
  let wake: (() => void) | undefined;
  const maxInFlightBinds = opts.maxInFlightBinds ?? 8;
  /** Binds in flight; its size is what `maxInFlightBinds` bounds. */
  const bindings = new Set<Promise<void>>();
  let closed = false;

  const poke = () => {
    wake?.();
  };
  /** A cluster event: every parked pod may fit now (after its backoff). */
  const nudge = () => {
    for (const e of queue.values()) delete e.parkedSince;
    poke();
  };
  const ready = (k: string, t: number) => {
    const e = queue.get(k);
    if (!e) return true;
    if (e.parkedSince !== undefined && t - e.parkedSince >= maxParked) delete e.parkedSince;
    return e.parkedSince === undefined && e.notBefore <= t;
  };

  void client.listWatch(
    '/api/v1/nodes',
    '',
    {
      onSync: (items) => {
        nodes.clear();
        for (const n of items) nodes.set(n.metadata.name, n as unknown as SchedNode);
        nudge();
      },
      onEvent: (e) => {
        if (e.type === 'DELETED') nodes.delete(e.object.metadata.name);
        else nodes.set(e.object.metadata.name, e.object as unknown as SchedNode);
        nudge();
      },
    },
    abort.signal,
  );
  void client.listWatch(
    '/api/v1/pods',
    '',
    {
      onSync: (items) => {
        pods.clear();
        for (const p of items) pods.set(keyOf(p), p);
        poke();
      },
      onEvent: (e) => {
        const k = keyOf(e.object);
        if (e.type === 'DELETED') {
          pods.delete(k);
          queue.delete(k);
          assumed.delete(k);
          nudge(); // capacity freed: retry what waits
        } else {
          const before = pods.get(k);
          pods.set(k, e.object);
          // A change to an assigned pod (allocated, finished) may free what waiting pods need,
          // as kube-scheduler's AssignedPodUpdate event moves them back to the active queue.
          if ((e.object.spec as { nodeName?: string })?.nodeName) {
            assumed.delete(k);
            nudge();
          } else {
            // A metadata change of a parked pod (the control plane's capacity nudge) unparks it.
            const changed =
              JSON.stringify(before?.metadata.annotations ?? {}) !==
                JSON.stringify(e.object.metadata.annotations ?? {}) ||
              JSON.stringify(before?.metadata.labels ?? {}) !== JSON.stringify(e.object.metadata.labels ?? {});
            const entry = queue.get(k);
            if (changed && entry) delete entry.parkedSince;
            poke();
          }
        }
      },
    },
    abort.signal,
  );

  function nodeOf(p: KubeObj): string | undefined {
    return (p.spec as { nodeName?: string } | undefined)?.nodeName || assumed.get(keyOf(p));
  }

  function usedOnNode(node: string): Map<string, number> {
    const used = new Map<string, number>([['pods', 0]]);
    for (const p of pods.values()) {
      const phase = (p.status as { phase?: string } | undefined)?.phase;
      if (nodeOf(p) !== node || phase === 'Succeeded' || phase === 'Failed') continue;
      used.set('pods', used.get('pods')! + 1);
      for (const [k, v] of podRequests(p as unknown as SchedPod)) used.set(k, (used.get(k) ?? 0) + v);
    }
    return used;
  }

  function pendingPods(): KubeObj[] {
    return [...pods.values()]
      .filter((p) => {
        const spec = p.spec as { schedulerName?: string } | undefined;
        return (
          !nodeOf(p) && !p.metadata.deletionTimestamp && schedulerNames.has(spec?.schedulerName ?? 'default-scheduler')
        );
      })
      .sort((a, b) => String(a.metadata['creationTimestamp']).localeCompare(String(b.metadata['creationTimestamp'])));
  }

  /** `unschedulable`: no node fits (parked until an event); `error`: the attempt failed (not parked). */
  async function recordFailure(pod: KubeObj, message: string, kind: 'unschedulable' | 'error'): Promise<void> {
    const k = keyOf(pod);
    const entry = queue.get(k) ?? { attempts: 0, notBefore: 0 };
    entry.attempts++;
    entry.notBefore = now() + Math.min(maxBackoff, initialBackoff * 2 ** (entry.attempts - 1));
    if (kind === 'unschedulable') entry.parkedSince = now();
    else delete entry.parkedSince;
    const repeated = entry.lastMessage === message;
    entry.lastMessage = message;
    queue.set(k, entry);
    if (repeated) return;
    const ns = pod.metadata.namespace ?? 'default';
    const time = new Date(now()).toISOString();
    await client
      .create(`/api/v1/namespaces/${ns}/events`, {
        metadata: { name: `${pod.metadata.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
        involvedObject: {
          apiVersion: 'v1',
          kind: 'Pod',
          namespace: ns,
          name: pod.metadata.name,
          uid: pod.metadata.uid,
        },
        reason: 'FailedScheduling',
        message,
        type: 'Warning',
        source: { component: schedulerName },
        firstTimestamp: time,
        lastTimestamp: time,
        count: 1,
        reportingComponent: schedulerName,
      })
      .catch(() => undefined);
    await client
      .strategicPatch(`${podPath(ns, pod.metadata.name)}/status`, {
        status: {
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: kind === 'unschedulable' ? 'Unschedulable' : 'SchedulerError',
              message,
              lastTransitionTime: time,
            },
          ],
        },
      })
      .catch(() => undefined);
  }

  /** One scheduling cycle for one pod; returns the node it was bound to, or undefined. */
  async function scheduleOne(pod: KubeObj): Promise<string | undefined> {
    stats.attempts++;
    const sp = pod as unknown as SchedPod;
    const all = [...nodes.values()];
    const reasons = new Map<string, string>();
    let feasible = all.filter((n) => {
      const why = filterNode(sp, n, { usedOnNode, ignoredResources: ignored });
      if (why) reasons.set(n.metadata.name, why);
      return !why;
    });
    const scores = new Map<string, number>(feasible.map((n) => [n.metadata.name, 0]));
    let binder: (typeof config.extenders)[number] | undefined;
    for (const ext of config.extenders) {
      if (!isInterested(ext, sp)) continue;
      if (ext.bindVerb) binder = ext;
      if (!ext.filterVerb || feasible.length === 0) continue;
      try {
        const out = await callFilter(ext, sp, feasible);
        for (const [n, why] of out.failed) reasons.set(n, why);
        const keep = new Set(out.nodeNames);
        feasible = feasible.filter((n) => keep.has(n.metadata.name));
      } catch (e) {
        if (ext.ignorable) continue;
        throw e;
      }
    }
    if (feasible.length === 0) {
      stats.unschedulable++;
      await recordFailure(pod, summarizeFailures(all.length, reasons), 'unschedulable');
      return undefined;
    }
    for (const ext of config.extenders) {
      if (!ext.prioritizeVerb || !isInterested(ext, sp) || feasible.length < 2) continue;
      for (const [host, s] of await callPrioritize(ext, sp, feasible)) {
        // kube-scheduler scales extender scores to its 0..100 range: score x weight x 100/10.
        if (scores.has(host)) scores.set(host, scores.get(host)! + s * ext.weight * 10);
      }
    }
    const best = Math.max(...feasible.map((n) => scores.get(n.metadata.name)!));
    const top = feasible.filter((n) => scores.get(n.metadata.name) === best);
    const chosen = top[Math.floor(Math.random() * top.length)]!.metadata.name;
    // 5. Bind in the background, as kube-scheduler's binding cycle does: the pod is assumed on
    // its node meanwhile, so the next cycles count it; a failed bind un-assumes it and retries.
    assumed.set(keyOf(pod), chosen);
    const bind = async () => {
      if (binder) await callBind(binder, sp, chosen);
      else {
        await client.create(`${podPath(pod.metadata.namespace ?? 'default', pod.metadata.name)}/binding`, {
          apiVersion: 'v1',
          kind: 'Binding',
          metadata: { name: pod.metadata.name, uid: pod.metadata.uid },
          target: { apiVersion: 'v1', kind: 'Node', name: chosen },
        });
      }
    };
    const binding = bind().then(
      () => {
        stats.bound++;
        queue.delete(keyOf(pod));
        opts.log?.(`bound ${keyOf(pod)} to ${chosen}`);
      },
      async (e: Error) => {
        assumed.delete(keyOf(pod));
        stats.errors++;
        await recordFailure(pod, `binding rejected: ${e.message}`, 'error');
      },
    );
    bindings.add(binding);
    void binding.finally(() => {
      bindings.delete(binding);
      poke();
    });
    return chosen;
  }

  const done = (async () => {
    while (!closed) {
      const t = now();
      for (const pod of pendingPods().filter((p) => ready(keyOf(p), t))) {
        if (closed || bindings.size >= maxInFlightBinds) break;
        if (assumed.has(keyOf(pod))) continue;
        try {
          await scheduleOne(pod);
        } catch (e) {
          stats.errors++;
          await recordFailure(pod, (e as Error).message, 'error');
        }
      }
      const waits = pendingPods()
        .map((p) => queue.get(keyOf(p)))
        .map((e) => (e?.parkedSince !== undefined ? e.parkedSince + maxParked : (e?.notBefore ?? 0)) - now());
      const delay = waits.length ? Math.max(5, Math.min(...waits, 1000)) : 1000;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  })();

  return {
    nudge,
    stats: () => ({ ...stats }),
    close: async () => {
      closed = true;
      abort.abort();
      wake?.();
      await done;
      await Promise.allSettled([...bindings]);
    },
  };
}
