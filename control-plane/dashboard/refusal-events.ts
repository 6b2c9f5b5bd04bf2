/**
 * Feeds the refusal log from the cluster's Events, so every control-plane replica lists every
 * refusal (its own, the other replicas', the node agents' VcudaAllocateFailed), not only the
 * ones it emitted itself. List, then watch from that list's resourceVersion; relist on any end.
 */
import { CoreV1Api, type KubeConfig, Watch } from '@kubernetes/client-node';
import type { PodEventLike, RefusalLog } from './refusal-log.js';

/** Refusals are Warning Events on Pods; the reason is filtered here (one selector cannot OR reasons). */
export const REFUSAL_EVENT_SELECTOR = 'type=Warning,involvedObject.kind=Pod';

export type RefusalEventWatch = { stop(): void; synced(): boolean };

export function watchRefusalEvents(
  kc: KubeConfig,
  log: Pick<RefusalLog, 'recordEvent'>,
  opts: { cluster: string; retryMs?: number; onError?: (err: unknown) => void },
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
      const list = await core.listEventForAllNamespaces({ fieldSelector: REFUSAL_EVENT_SELECTOR });
      for (const e of list.items) log.recordEvent(e as PodEventLike, opts.cluster);
      synced = true;
      if (stopped) return;
      abort = await new Watch(kc).watch(
        '/api/v1/events',
        {
          fieldSelector: REFUSAL_EVENT_SELECTOR,
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
