/**
 * Feeds the refusal log from the cluster's Events, so every control-plane replica lists every
 * refusal (its own, the other replicas', the node agents' VcudaAllocateFailed), not only the
 * ones it emitted itself. List, then watch from that list's resourceVersion; relist on any end.
 */
import { CoreV1Api, type KubeConfig, Watch } from '@kubernetes/client-node';
import { eventReasons } from '../../contract/index.js';
import type { PodEventLike } from './pod-event-log.js';
import { type PreemptionLog, SCHEDULER_PREEMPTED_REASON } from './preemption-log.js';
import type { RefusalLog } from './refusal-log.js';

/** Refusals are Warning Events on Pods; the reason is filtered here (one selector cannot OR reasons). */
export const REFUSAL_EVENT_SELECTOR = 'type=Warning,involvedObject.kind=Pod';

/** Preemptions are Normal Events, one reason per watch (a field selector cannot OR reasons). */
export const PREEMPTION_EVENT_SELECTORS = [
  `reason=${eventReasons.preempting},involvedObject.kind=Pod`,
  `reason=${SCHEDULER_PREEMPTED_REASON},involvedObject.kind=Pod`,
] as const;

export type RefusalEventWatch = { stop(): void; synced(): boolean };

type WatchOptions = { cluster: string; retryMs?: number; onError?: (err: unknown) => void };

export function watchRefusalEvents(
  kc: KubeConfig,
  log: Pick<RefusalLog, 'recordEvent'>,
  opts: WatchOptions,
): RefusalEventWatch {
  return watchPodEvents(kc, log, { ...opts, fieldSelector: REFUSAL_EVENT_SELECTOR });
}

/** Both sides of every preemption of the cluster, whichever replica or scheduler wrote them. */
export function watchPreemptionEvents(
  kc: KubeConfig,
  log: Pick<PreemptionLog, 'recordEvent'>,
  opts: WatchOptions,
): RefusalEventWatch {
  const watches = PREEMPTION_EVENT_SELECTORS.map((fieldSelector) =>
    watchPodEvents(kc, log, { ...opts, fieldSelector }),
  );
  return {
    stop: () => {
      for (const w of watches) w.stop();
    },
    synced: () => watches.every((w) => w.synced()),
  };
}

/** Lists then watches the Events the selector picks, feeding each to `log`; relists on any end. */
function watchPodEvents(
  kc: KubeConfig,
  log: { recordEvent(event: PodEventLike, cluster?: string): boolean },
  opts: WatchOptions & { fieldSelector: string },
): RefusalEventWatch {
  const core = kc.makeApiClient(CoreV1Api);
  const retryMs = opts.retryMs ?? 2000;
  let stopped = false;
  let synced = false;
  let abort: { abort(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;

  const again = (err?: unknown) => {
    if (stopped) return;
    if (err) opts.onError?.(err);
    timer = setTimeout(() => void run(), retryMs);
    timer.unref();
  };

  const run = async () => {
    try {
      const list = await core.listEventForAllNamespaces({ fieldSelector: opts.fieldSelector });
      for (const e of list.items) log.recordEvent(e as PodEventLike, opts.cluster);
      synced = true;
      if (stopped) return;
      abort = await new Watch(kc).watch(
        '/api/v1/events',
        {
          fieldSelector: opts.fieldSelector,
          resourceVersion: list.metadata?.resourceVersion,
          allowWatchBookmarks: true,
        },
        (phase: string, obj: PodEventLike) => {
          if (phase === 'ADDED' || phase === 'MODIFIED') log.recordEvent(obj, opts.cluster);
        },
        (err: unknown) => again(err ?? undefined),
      );
      if (stopped) abort.abort();
    } catch (err) {
      again(err);
    }
  };

  void run();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      abort?.abort();
    },
    synced: () => synced,
  };
}
