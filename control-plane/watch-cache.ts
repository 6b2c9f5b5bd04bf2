/**
 * Informers on Nodes and Pods feeding the ClusterState. Started once per process; on restart the
 * informers list everything again, so the view is rebuilt from scratch with nothing lost.
 */
import { CoreV1Api, type KubeConfig, type KubernetesObject, makeInformer } from '@kubernetes/client-node';
import type { ClusterState } from './cluster-state.js';
import type { NodeLike, PodWithStatus } from './placement/cluster-snapshot.js';

export type WatchCache = {
  state: ClusterState;
  /** Resolves once both informers listed their objects and the listed pods' assignments are verified. */
  start(): Promise<void>;
  isSynced(): boolean;
  stop(): Promise<void>;
};

export type WatchCacheOptions = {
  /** Called on informer errors; the informer itself retries after `retryMs`. */
  onError?: (err: unknown) => void;
  retryMs?: number;
};

export function createWatchCache(kc: KubeConfig, state: ClusterState, opts: WatchCacheOptions = {}): WatchCache {
  const core = kc.makeApiClient(CoreV1Api);
  const nodes = makeInformer<KubernetesObject>(kc, '/api/v1/nodes', () => core.listNode());
  const pods = makeInformer<KubernetesObject>(kc, '/api/v1/pods', () => core.listPodForAllNamespaces());
  let synced = false;
  let stopped = false;
  const retryMs = opts.retryMs ?? 2000;

  nodes.on('add', (n) => state.upsertNode(n as NodeLike));
  nodes.on('update', (n) => state.upsertNode(n as NodeLike));
  nodes.on('delete', (n) => state.removeNode(n.metadata?.name ?? ''));
  pods.on('add', (p) => state.upsertPod(p as PodWithStatus));
  pods.on('update', (p) => state.upsertPod(p as PodWithStatus));
  pods.on('delete', (p) => state.removePod(p as PodWithStatus));
  for (const informer of [nodes, pods]) {
    // The informer stops on error; restart it after a pause, relisting everything.
    informer.on('error', (err) => {
      opts.onError?.(err);
      if (stopped) return;
      setTimeout(() => {
        if (!stopped) informer.start().catch((e) => opts.onError?.(e));
      }, retryMs).unref();
    });
  }

  return {
    state,
    async start() {
      await Promise.all([nodes.start(), pods.start()]);
      // Ready only once the listed holds count: until then every pod's cards would look free.
      await state.settled();
      synced = true;
    },
    isSynced: () => synced,
    async stop() {
      stopped = true;
      await Promise.all([nodes.stop(), pods.stop()]);
    },
  };
}
