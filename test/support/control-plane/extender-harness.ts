/**
 * Builds a real extender (routes, binder, watch cache, ledger on a test database) against the fake
 * Kubernetes API, for route tests and the benchmark. Test-only.
 */
import { Registry } from 'prom-client';
import type { ClusterState } from '../../../control-plane/cluster-state.js';
import { createExtenderMetrics } from '../../../control-plane/extender/extender-metrics.js';
import { Nudger } from '../../../control-plane/extender/nudger.js';
import { PodWriteBatcher } from '../../../control-plane/extender/pod-write-batcher.js';
import { type ExtenderDeps, extenderRoutes } from '../../../control-plane/extender/routes.js';
import { createKubeClient } from '../../../control-plane/kube-client.js';
import { createAssignmentSigner, type KeySet } from '../../../control-plane/signing-keys.js';
import { createWatchCache, type WatchCache } from '../../../control-plane/watch-cache.js';
import type { VcudaDb } from '../../../db/connect.js';
import { createLedger } from '../../../db/ledger.js';
import { policy, testKeySet, testState } from './builders.js';
import type { FakeKubeApi } from './fake-kube-api.js';

export const TEST_NOW = new Date('2026-11-22T04:00:30Z');

/** The keys assignedPod signs with, so pods put in the fake API verify. */
export async function testKeys(): Promise<KeySet> {
  return testKeySet;
}

export type ExtenderHarness = {
  app: ReturnType<typeof extenderRoutes>;
  deps: ExtenderDeps;
  registry: Registry;
  cache?: WatchCache;
  /** Resolves once the binds answered so far have confirmed their reservations (reserved -> bound). */
  confirmed(): Promise<void>;
  close(): Promise<void>;
};

export async function startExtender(opts: {
  api: FakeKubeApi;
  db: VcudaDb;
  keys: KeySet;
  /** Follow the fake API with informers (default) or keep only this replica's own view. */
  watch?: boolean;
  state?: ClusterState;
  instanceId?: string;
  clock?: () => Date;
}): Promise<ExtenderHarness> {
  const clock = opts.clock ?? (() => TEST_NOW);
  const registry = new Registry();
  const kube = createKubeClient(opts.api.kubeConfig);
  let cache: WatchCache | undefined;
  let state = opts.state ?? testState({ keys: opts.keys });
  if (opts.watch ?? true) {
    cache = createWatchCache(opts.api.kubeConfig, state);
    await cache.start();
    state = cache.state;
  }
  const metrics = createExtenderMetrics(registry);
  const nudger = new Nudger({
    clock,
    debounceMs: 1,
    patch: async (t, annotations) => {
      await kube.patchPodAnnotations(t.namespace, t.name, annotations);
    },
    onNudged: () => metrics.nudges.inc(),
  });
  state.onCapacityFreed((e) => nudger.capacityFreed(e));
  const ledger = createLedger(opts.db, { clock });
  const confirms = new PodWriteBatcher((uids) => ledger.confirmMany('test', uids));
  const deps: ExtenderDeps = {
    config: {
      cluster: 'test',
      quantity: policy,
      defaultPlacement: 'binpack',
      heartbeatStaleMs: 60_000,
      assignmentTtlMs: 300_000,
      instanceId: opts.instanceId ?? 'replica-0',
    },
    state,
    kube,
    ledger,
    signer: createAssignmentSigner(opts.keys, 600),
    clock,
    metrics,
    nudger,
    confirms,
  };
  return {
    app: extenderRoutes(deps),
    deps,
    registry,
    ...(cache ? { cache } : {}),
    confirmed: () => confirms.drain(),
    async close() {
      await confirms.drain();
      await nudger.close();
      await cache?.stop();
    },
  };
}

export async function post(
  app: { request: (url: string, init: RequestInit) => Response | Promise<Response> },
  path: string,
  body: unknown,
) {
  const res = await app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> & unknown[] };
}
